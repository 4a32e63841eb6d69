// Command tristore is one store served as S3 objects, NFS files and iSCSI
// LUNs, with the clients, emulated networks and workbench that measure them.
package main

import (
	"os"

	"github.com/tristore/tristore/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
