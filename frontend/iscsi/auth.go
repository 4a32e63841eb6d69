package iscsi

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// CHAPConfig says how initiators must authenticate to a target.
// Initiator is what the initiator must prove (one-way CHAP: the target
// challenges, the initiator answers with this user and secret). Target is
// what the target answers with when the initiator asks for mutual CHAP.
// An empty Initiator means no authentication (AuthMethod=None).
type CHAPConfig struct {
	Initiator wire.CHAPCredentials
	Target    wire.CHAPCredentials
}

// Required reports whether CHAP is mandatory.
func (c CHAPConfig) Required() bool { return c.Initiator.Set() }

// LoadCHAPFile reads per-target CHAP settings, one target per line:
//
//	IQN  USER SECRET  [MUTUAL-USER MUTUAL-SECRET]
//
// '#' starts a comment. An IQN of "*" sets the default for targets not
// listed. Secrets must be 12-16 bytes or more as RFC 7143 recommends; we
// only refuse empty ones.
func LoadCHAPFile(path string) (map[string]CHAPConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("iscsi CHAP file: %w", err)
	}
	defer f.Close()
	out := map[string]CHAPConfig{}
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 && len(fs) != 5 {
			return nil, fmt.Errorf("iscsi CHAP file %s:%d: want IQN USER SECRET [MUTUAL-USER MUTUAL-SECRET]", path, ln)
		}
		c := CHAPConfig{Initiator: wire.CHAPCredentials{User: fs[1], Secret: fs[2]}}
		if len(fs) == 5 {
			c.Target = wire.CHAPCredentials{User: fs[3], Secret: fs[4]}
		}
		out[strings.ToLower(fs[0])] = c
	}
	return out, sc.Err()
}
