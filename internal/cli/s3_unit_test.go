package cli

import (
	"crypto/md5"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Listings carry LastModified to the second (versitygw, AWS): a file
// written in the same second as its upload is not newer than the object.
func TestSyncChangedWholeSeconds(t *testing.T) {
	written := time.Date(2026, 1, 2, 3, 4, 5, 700_000_000, time.UTC)
	f := localFile{size: 10, mtime: written.UnixNano()}
	listed := s3Object{size: 10, mtime: written.Truncate(time.Second)}
	if changed(f, listed, true, false, 5<<20) {
		t.Error("upload: a file from the object's own second counted as newer")
	}
	if changed(f, listed, false, false, 5<<20) {
		t.Error("download: counted as changed")
	}
	f.mtime = written.Add(time.Second).UnixNano()
	if !changed(f, listed, true, false, 5<<20) {
		t.Error("upload: a file a second newer was not sent")
	}
	f.mtime, f.size = written.UnixNano(), 11
	if !changed(f, listed, true, false, 5<<20) {
		t.Error("a size change was missed")
	}
}

func TestFilters(t *testing.T) {
	mk := func(specs ...string) []filterRule {
		var rules []filterRule
		for _, s := range specs {
			re, err := globRegexp(s[1:])
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, filterRule{include: s[0] == '+', glob: s[1:], re: re})
		}
		return rules
	}
	cases := []struct {
		rules []filterRule
		path  string
		want  bool
	}{
		{nil, "a/b.txt", true},
		{mk("-*.log"), "x/y.log", false},
		{mk("-*.log"), "x/y.txt", true},
		{mk("-*", "+*.txt"), "deep/a.txt", true},
		{mk("-*", "+*.txt"), "deep/a.bin", false},
		{mk("+*.txt", "-*"), "a.txt", false}, // the last match wins
		{mk("-a?c"), "abc", false},
		{mk("-a?c"), "abbc", true},
		{mk("-[ab]*"), "b1", false},
		{mk("-[!ab]*"), "b1", true},
		{mk("-a.b"), "axb", true}, // '.' is literal
	}
	for _, c := range cases {
		if got := selected(c.rules, c.path); got != c.want {
			t.Errorf("%v on %q: %v, want %v", c.rules, c.path, got, c.want)
		}
	}
	if _, err := globRegexp("a[b"); err == nil {
		t.Error("unclosed [ accepted")
	}
}

func TestLocalPathRefusesEscapes(t *testing.T) {
	for _, rel := range []string{"../x", "a/../../x", "/abs", "a//b", "./a", ""} {
		if _, err := localPath("/d", rel); err == nil {
			t.Errorf("%q accepted", rel)
		}
	}
	if p, err := localPath("/d", "a/b"); err != nil || p != "/d/a/b" {
		t.Errorf("a/b: %q %v", p, err)
	}
}

func TestETagMatches(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := randData(9, 12<<20+1)
	os.WriteFile(p, data, 0o644)
	whole := md5.Sum(data)
	var parts []byte
	for off := 0; off < len(data); off += 5 << 20 {
		s := md5.Sum(data[off:min(off+5<<20, len(data))])
		parts = append(parts, s[:]...)
	}
	mp := md5.Sum(parts)
	for _, c := range []struct {
		etag string
		want bool
	}{
		{`"` + hex.EncodeToString(whole[:]) + `"`, true},
		{hex.EncodeToString(mp[:]) + "-3", true}, // 5 MiB parts, found from the count
		{hex.EncodeToString(mp[:]) + "-4", false},
		{hex.EncodeToString(whole[:]) + "-0", false}, // tristore's placeholder
		{"not-an-md5", false},
	} {
		got, err := etagMatches(p, int64(len(data)), c.etag, 8<<20)
		if err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.etag, got, err, c.want)
		}
	}
}

func TestAWSIniSections(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config")
	os.WriteFile(p, []byte("; comment\n[default]\nregion=eu-west-1\n[profile x]\naws_access_key_id = AK\ns3 =\n  addressing_style = virtual\n  endpoint_url = http://h\nregion = r\n"), 0o600)
	sec, ok, err := iniSection(p, "profile x")
	if err != nil || !ok || sec["aws_access_key_id"] != "AK" || sec["s3.addressing_style"] != "virtual" ||
		sec["s3.endpoint_url"] != "http://h" || sec["region"] != "r" {
		t.Fatalf("%v %v %v", sec, ok, err)
	}
	if _, ok, _ := iniSection(p, "profile y"); ok {
		t.Error("missing section found")
	}
	os.WriteFile(p, []byte("[x\n"), 0o600)
	if _, _, err := iniSection(p, "x"); err == nil {
		t.Error("bad header accepted")
	}
}

// Every transfer command has --chunk-size and --parallel (what --auto
// fills in), the chores have neither.
func TestS3TransferFlags(t *testing.T) {
	root := NewRoot()
	s3, _, err := root.Find([]string{"s3"})
	if err != nil {
		t.Fatal(err)
	}
	transfer := map[string]bool{"cp": true, "sync": true, "cat": true, "prefetch": true}
	mine := map[string]bool{"ls": true, "cp": true, "sync": true, "rm": true, "mb": true, "rb": true, "cat": true, "presign": true, "prefetch": true}
	seen := 0
	for _, c := range s3.Commands() {
		if !mine[c.Name()] {
			continue // e.g. tune, the tuner's own
		}
		has := c.Flags().Lookup("chunk-size") != nil && c.Flags().Lookup("parallel") != nil
		if has != transfer[c.Name()] {
			t.Errorf("%s: transfer flags %v, want %v", c.Name(), has, transfer[c.Name()])
		}
		seen++
	}
	if seen != 9 {
		t.Errorf("%d s3 subcommands, want 9 (ls cp sync rm mb rb cat presign prefetch)", seen)
	}
}

// The hooks --auto uses: a flag added to every transfer command, and
// options rewritten before the engine is built (13 MiB in 6 MiB parts is
// 3 parts where the flags' 8 MiB would make 2).
func TestS3TransferHooks(t *testing.T) {
	defer func(f []func(*pflag.FlagSet), h []func(*cobra.Command, s3Conn, *s3TransferOptions) error) {
		s3TransferFlagHooks, s3TransferHooks = f, h
	}(s3TransferFlagHooks, s3TransferHooks)
	s3TransferFlagHooks = append(s3TransferFlagHooks, func(fs *pflag.FlagSet) { fs.Bool("test-auto", false, "") })
	var sawEndpoint string
	s3TransferHooks = append(s3TransferHooks, func(cmd *cobra.Command, c s3Conn, o *s3TransferOptions) error {
		if cfg.GetBool("test-auto") {
			sawEndpoint = c.Endpoint
			o.ChunkSize, o.Parallel = 6<<20, 2
		}
		return nil
	})
	ep := s3Env(t)
	s3Run(t, 0, "mb", "s3://hooks")
	src := filepath.Join(t.TempDir(), "f")
	os.WriteFile(src, randData(4, 13<<20), 0o644)
	out, _ := s3Run(t, 0, "cp", src, "s3://hooks/f", "--json", "--test-auto")
	if s := summary(t, out); s.Requests != 1+1+3+1 || sawEndpoint != ep {
		t.Errorf("with the hook: %+v (want list, create, 3 parts, complete), endpoint %q", s, sawEndpoint)
	}
	out, _ = s3Run(t, 0, "cp", src, "s3://hooks/g", "--json")
	if s := summary(t, out); s.Requests != 1+1+2+1 {
		t.Errorf("without: %+v", s)
	}
}
