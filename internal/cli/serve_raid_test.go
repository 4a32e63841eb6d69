package cli

import (
	"strings"
	"testing"
)

// TestParseRaidSpecs: --raid values are NAME=MEMBER,... with a volume-style
// name; anything else is refused with the value in the message.
func TestParseRaidSpecs(t *testing.T) {
	got, err := parseRaidSpecs([]string{"r5=/d/a, /d/b,,iscsi://h:1/iqn.x:y/0", "r0=/d/c"})
	if err != nil || len(got) != 2 || got[0].name != "r5" || strings.Join(got[0].members, "|") != "/d/a|/d/b|iscsi://h:1/iqn.x:y/0" ||
		got[1].name != "r0" || len(got[1].members) != 1 {
		t.Fatalf("parse: %+v %v", got, err)
	}
	for _, bad := range [][]string{{"r5"}, {"r5="}, {"R5=/a"}, {"a:b=/a"}, {"r=/a", "r=/b"}} {
		if _, err := parseRaidSpecs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
