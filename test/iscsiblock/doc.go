// Package iscsiblock holds the end-to-end tests of tristore's block path:
// the userspace initiator (client/iscsi) against tgt and against our own
// target, and a real kernel ext4 on a loop device over the FUSE block file
// (fusefs/blockfile) on an iSCSI session.
package iscsiblock
