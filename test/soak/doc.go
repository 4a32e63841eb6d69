// Package soak runs real programs through all three views of one
// `tristore serve` at once — git, tar and sqlite3 through the NFS FUSE
// mount, ext4 and an fsx-style model checker through the iSCSI FUSE mount
// and a loop device, an S3 loop with a model of what must be there, and
// cross-view checksums — while a chaos loop kill -9s, restarts and stalls
// (SIGSTOP/SIGCONT) the server, optionally across an emulated lossy link.
// At the end every file system must be fsck-clean, every acknowledged
// write present and the views must agree.
//
// The long run is behind TRISTORE_SOAK=DURATION (scripts/soak.sh); see
// docs/soak.md. Without it the test skips with the reason.
package soak
