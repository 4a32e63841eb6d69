package iscsi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev/filelun"
	wire "github.com/tristore/tristore/proto/iscsi"
	"github.com/tristore/tristore/store"
)

func sendTargets(t *testing.T, addr string) []string {
	t.Helper()
	in, err := dial(t, addr, loginOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.nc.Close()
	if err := in.send(&wire.PDU{Opcode: wire.OpTextReq, Immediate: true, Final: true, ITT: in.nextITT(), TTT: wire.ReservedTag,
		CmdSN: in.cmdSN, Data: wire.EncodeText([]wire.KV{{Key: "SendTargets", Value: "All"}})}); err != nil {
		t.Fatal(err)
	}
	r, err := in.recv()
	if err != nil || r.Opcode != wire.OpTextResp {
		t.Fatalf("%v %v", r, err)
	}
	kv, _ := wire.ParseText(r.Data)
	var names []string
	for _, p := range kv {
		if p.Key == "TargetName" {
			names = append(names, p.Value)
		}
	}
	return names
}

// One volume whose object vanished must not empty discovery: the others
// are still offered, the broken one is left out.
func TestDiscoveryWithBrokenVolume(t *testing.T) {
	tt := startTarget(t, Config{})
	ctx := context.Background()
	for _, n := range []string{"gone", "more"} {
		if _, err := filelun.Create(ctx, tt.st, "vols", n, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(tt.st.(store.LocalPather).Root(), "vols", "gone")); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(sendTargets(t, tt.addr), " ")
	want := TargetName("vols", "disk") + " " + TargetName("vols", "more")
	if got != want {
		t.Fatalf("SendTargets with one broken volume: %q, want %q", got, want)
	}
	// The broken one cannot be logged in to, the others can.
	if _, err := dial(t, tt.addr, loginOpts{target: TargetName("vols", "gone")}); !errors.Is(err, errLoginStatus) {
		t.Fatalf("login to a broken volume: %v, want a login error status", err)
	}
	if _, err := dial(t, tt.addr, loginOpts{target: TargetName("vols", "more")}); err != nil {
		t.Fatalf("login to a good volume next to a broken one: %v", err)
	}
}

// While an initiator is logged in, the volume's object cannot be replaced
// or deleted through the object view, and what the initiator wrote stays;
// after logout it can.
func TestLoggedInVolumeIsProtected(t *testing.T) {
	tt := startTarget(t, Config{})
	ctx := context.Background()
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{0xa5}, 4096)
	if _, err := in.cmd(wire.Write10(0, 8, true), data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tt.st.Put(ctx, "vols", "disk", strings.NewReader("x\n"), 2, store.ObjectMeta{}); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("PUT onto a logged-in volume: %v", err)
	}
	if err := tt.st.Delete(ctx, "vols", "disk"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("DELETE of a logged-in volume: %v", err)
	}
	rc, _, err := tt.st.Get(ctx, "vols", "disk", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("volume data changed by refused calls")
	}
	in.nc.Close()
	// The session ends asynchronously; the volume is released with it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := tt.st.Delete(ctx, "vols", "disk")
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrInUse) || time.Now().After(deadline) {
			t.Fatalf("DELETE after logout: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
