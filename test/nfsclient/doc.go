// Package nfsclient holds the end-to-end tests of tristore's NFS v3 client
// (client/nfs), its FUSE mount (fusefs/nfstree) and the `tristore nfs` and
// `tristore mount nfs://` commands, against two servers: nfs-ganesha (the
// peer, run inside a network namespace the test creates) and tristore's own
// NFS front end. The package has no code of its own; everything is in tests.
package nfsclient
