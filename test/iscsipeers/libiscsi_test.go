package iscsipeers

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil"
	wire "github.com/tristore/tristore/proto/iscsi"
)

// TestLibiscsiTools: discovery, inquiry and capacity as libiscsi sees them,
// also with CHAP in the URL.
func TestLibiscsiTools(t *testing.T) {
	testutil.NeedCmd(t, "iscsi-ls")
	testutil.NeedCmd(t, "iscsi-inq")
	testutil.NeedCmd(t, "iscsi-readcapacity16")
	tg := startOurs(t, 64<<20, iscsitgt.Config{})
	out := testutil.Run(t, time.Minute, "iscsi-ls", "-s", "iscsi://"+tg.addr)
	if !strings.Contains(out, "Target:"+tg.iqn+" Portal:"+tg.addr+",1") || !strings.Contains(out, "Lun:0") || !strings.Contains(out, "DIRECT_ACCESS") {
		t.Fatalf("iscsi-ls:\n%s", out)
	}
	out = testutil.Run(t, time.Minute, "iscsi-inq", tg.url)
	for _, want := range []string{"Vendor:TRISTORE", "Peripheral Device Type:DIRECT_ACCESS", "CmdQue:1", "SBC-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("iscsi-inq lacks %q:\n%s", want, out)
		}
	}
	out = testutil.Run(t, time.Minute, "iscsi-inq", "-e", "1", "-c", "128", tg.url)
	if !strings.Contains(out, "Unit Serial Number") {
		t.Errorf("iscsi-inq VPD 0x80:\n%s", out)
	}
	out = testutil.Run(t, time.Minute, "iscsi-readcapacity16", tg.url)
	if !strings.Contains(out, "Total size:67108864") || !strings.Contains(out, "LOGICAL BLOCK LENGTH IN BYTES:512") {
		t.Fatalf("iscsi-readcapacity16:\n%s", out)
	}
}

func TestLibiscsiCHAP(t *testing.T) {
	testutil.NeedCmd(t, "iscsi-inq")
	user := wire.CHAPCredentials{User: "peeruser", Secret: "peer-secret-123"}
	tg := startOurs(t, 8<<20, iscsitgt.Config{CHAP: iscsitgt.CHAPConfig{Initiator: user}})
	good := "iscsi://peeruser%peer-secret-123@" + tg.addr + "/" + tg.iqn + "/0"
	if out := testutil.Run(t, time.Minute, "iscsi-inq", good); !strings.Contains(out, "TRISTORE") {
		t.Fatalf("iscsi-inq with CHAP:\n%s", out)
	}
	bad := "iscsi://peeruser%wrong-secret-0@" + tg.addr + "/" + tg.iqn + "/0"
	if out, err := testutil.TryRun(time.Minute, "iscsi-inq", bad); err == nil {
		t.Fatalf("iscsi-inq with a wrong secret succeeded:\n%s", out)
	}
	if out, err := testutil.TryRun(time.Minute, "iscsi-inq", tg.url); err == nil {
		t.Fatalf("iscsi-inq without CHAP succeeded:\n%s", out)
	}
}

// TestQemuImg copies an image to a LUN and back with qemu-img.
func TestQemuImg(t *testing.T) {
	testutil.NeedCmd(t, "qemu-img")
	tg := startOurs(t, 16<<20, iscsitgt.Config{})
	dir := t.TempDir()
	src := filepath.Join(dir, "src.raw")
	data := make([]byte, 16<<20)
	rand.Read(data[:6<<20]) // the rest stays zero (sparse on the way back)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Run(t, 2*time.Minute, "qemu-img", "convert", "-f", "raw", "-O", "raw", "-n", src, tg.url)
	back := filepath.Join(dir, "back.raw")
	testutil.Run(t, 2*time.Minute, "qemu-img", "convert", "-f", "raw", "-O", "raw", tg.url, back)
	got, err := os.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("image read back over iSCSI differs (%d vs %d bytes)", len(got), len(data))
	}
	out := testutil.Run(t, time.Minute, "qemu-img", "info", tg.url)
	if !strings.Contains(out, "16 MiB") {
		t.Errorf("qemu-img info:\n%s", out)
	}
}
