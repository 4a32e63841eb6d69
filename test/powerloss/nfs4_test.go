package powerloss_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/proto/nfs4"
)

// nfs4Scenario: an NFSv4.1 client is confirmed (CREATE_SESSION answered),
// then the power is cut. After the reboot the server must know that
// client, so it is in its grace period: a newcomer's OPEN is answered
// NFS4ERR_GRACE, and the known client can reclaim. A server that forgot
// the list would let the newcomer take opens and locks the old client is
// entitled to reclaim.
func nfs4Scenario(t testing.TB, r *rig, rounds int) *report {
	rep := &report{}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout())
	defer cancel()
	srv := r.start(ctx)
	// The file the newcomer opens, made durable (file and directory)
	// before any cut, so only the client list is in question.
	f, err := os.OpenFile(filepath.Join(r.data, "nfs4-file"), os.O_CREATE|os.O_WRONLY, 0o666)
	if err == nil {
		_, err = f.Write([]byte("x"))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
	}
	if d, derr := os.Open(r.data); err == nil && derr == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addr, owner string, reclaim bool) (*nfs.Client4, error) {
		return nfs.Dial4(ctx, addr, nfs.Options{V4Owner: owner, V4Reclaim: reclaim, Timeout: 15 * time.Second, Retries: -1})
	}
	for round := range rounds {
		owner := fmt.Sprintf("powerloss-client-%d", round)
		c, err := dial(srv.addrs["nfs"], owner, false)
		if err != nil {
			t.Fatalf("round %d: Dial4: %v", round, err)
		}
		r.crash()
		c.Close(context.Background())
		srv = r.start(ctx)
		nc, err := dial(srv.addrs["nfs"], fmt.Sprintf("newcomer-%d", round), false)
		if err != nil {
			t.Fatalf("round %d: newcomer: %v", round, err)
		}
		root, _, err := nc.LookupPath(ctx, "/")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		err = nc.Compound(ctx, nfs.Op4{Op: nfs4.OpPutFH, Args: &nfs4.PutFHArgs{FH: root}},
			nfs.Op4{Op: nfs4.OpOpen, Args: &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead,
				Owner: nfs4.Owner{ClientID: nc.ClientID(), Owner: []byte("o")}, Claim: nfs4.ClaimNull, Name: "nfs4-file"}, Res: &nfs4.OpenRes{}})
		nc.Close(context.Background())
		if !errors.Is(err, nfs4.ErrGrace) {
			rep.violate("round %d: client %s was confirmed before the cut, but after it a newcomer's OPEN got %v, not GRACE: the server forgot who may reclaim", round, owner, err)
			continue
		}
		// The known client ends its reclaim, which ends the grace period
		// for it (the others listed from earlier rounds keep theirs).
		back, err := dial(srv.addrs["nfs"], owner, true)
		if err != nil {
			t.Fatalf("round %d: %s again: %v", round, owner, err)
		}
		if err := back.ReclaimComplete(ctx); err != nil {
			rep.violate("round %d: RECLAIM_COMPLETE of %s: %v", round, owner, err)
		}
		back.Close(context.Background())
	}
	return rep
}

func TestNFS4ClientsSurvivePowerLoss(t *testing.T) {
	rep := nfs4Scenario(t, newRig(t, ourBin(t)), iterations(3))
	rep.errorAll(t)
}

// TestNFS4Teeth: without the fsyncs of the client list the scenario
// notices that the server forgot a confirmed client.
func TestNFS4Teeth(t *testing.T) {
	bin := faultsyncBin(t)
	mustCatch(t, bin, "nfs4-clients", func(r *rig) *report { return nfs4Scenario(t, r, 3) })
}
