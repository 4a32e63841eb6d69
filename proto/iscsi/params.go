package iscsi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Params are the operational parameters of a session and connection
// (RFC 7143 §13). Both sides start from DefaultParams, exchange keys and
// call Negotiate (responder) or Apply (originator, on the answer).
type Params struct {
	HeaderDigest bool // CRC32C on headers
	DataDigest   bool // CRC32C on data
	// MaxRecvDataSegmentLength is declarative per direction: what each side
	// may receive. Local is ours, Peer is what the other side declared.
	MaxRecvDataSegmentLengthLocal int
	MaxRecvDataSegmentLengthPeer  int
	MaxConnections                int
	InitialR2T                    bool
	ImmediateData                 bool
	FirstBurstLength              int
	MaxBurstLength                int
	DefaultTime2Wait              int
	DefaultTime2Retain            int
	MaxOutstandingR2T             int
	DataPDUInOrder                bool
	DataSequenceInOrder           bool
	ErrorRecoveryLevel            int
}

// DefaultParams returns the RFC 7143 defaults (what applies to a key that is
// never negotiated).
func DefaultParams() Params {
	return Params{
		MaxRecvDataSegmentLengthLocal: 8192,
		MaxRecvDataSegmentLengthPeer:  8192,
		MaxConnections:                1,
		InitialR2T:                    true,
		ImmediateData:                 true,
		FirstBurstLength:              65536,
		MaxBurstLength:                262144,
		DefaultTime2Wait:              2,
		DefaultTime2Retain:            20,
		MaxOutstandingR2T:             1,
		DataPDUInOrder:                true,
		DataSequenceInOrder:           true,
		ErrorRecoveryLevel:            0,
	}
}

// ErrBadValue is returned for a key value out of range or of the wrong form.
var ErrBadValue = errors.New("iscsi: bad key value")

type keyKind int

const (
	kindListDigest keyKind = iota
	kindMin
	kindMax
	kindAnd
	kindOr
	kindDeclarative
)

type keyRule struct {
	kind     keyKind
	min, max int
}

// rules lists the operational keys tristore negotiates. Keys not here are
// either declarative/security keys handled by the login code or unknown
// (answered with NotUnderstood).
var rules = map[string]keyRule{
	"HeaderDigest":             {kind: kindListDigest},
	"DataDigest":               {kind: kindListDigest},
	"MaxConnections":           {kindMin, 1, 65535},
	"InitialR2T":               {kind: kindOr},
	"ImmediateData":            {kind: kindAnd},
	"FirstBurstLength":         {kindMin, 512, MaxDataSegmentLength},
	"MaxBurstLength":           {kindMin, 512, MaxDataSegmentLength},
	"DefaultTime2Wait":         {kindMax, 0, 3600},
	"DefaultTime2Retain":       {kindMin, 0, 3600},
	"MaxOutstandingR2T":        {kindMin, 1, 65535},
	"DataPDUInOrder":           {kind: kindOr},
	"DataSequenceInOrder":      {kind: kindOr},
	"ErrorRecoveryLevel":       {kindMin, 0, 2},
	"MaxRecvDataSegmentLength": {kindDeclarative, 512, MaxDataSegmentLength},
	"IFMarker":                 {kind: kindAnd},
	"OFMarker":                 {kind: kindAnd},
}

// IsOperationalKey reports whether key is one Negotiate handles.
func IsOperationalKey(key string) bool { _, ok := rules[key]; return ok }

func boolStr(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

func parseBool(v string) (bool, error) {
	switch v {
	case "Yes":
		return true, nil
	case "No":
		return false, nil
	}
	return false, fmt.Errorf("%w: %q is not Yes or No", ErrBadValue, v)
}

func digestStr(b bool) string {
	if b {
		return "CRC32C"
	}
	return "None"
}

// get returns our current value of key as a string.
func (p *Params) get(key string) string {
	switch key {
	case "HeaderDigest":
		return digestStr(p.HeaderDigest)
	case "DataDigest":
		return digestStr(p.DataDigest)
	case "MaxConnections":
		return strconv.Itoa(p.MaxConnections)
	case "InitialR2T":
		return boolStr(p.InitialR2T)
	case "ImmediateData":
		return boolStr(p.ImmediateData)
	case "FirstBurstLength":
		return strconv.Itoa(p.FirstBurstLength)
	case "MaxBurstLength":
		return strconv.Itoa(p.MaxBurstLength)
	case "DefaultTime2Wait":
		return strconv.Itoa(p.DefaultTime2Wait)
	case "DefaultTime2Retain":
		return strconv.Itoa(p.DefaultTime2Retain)
	case "MaxOutstandingR2T":
		return strconv.Itoa(p.MaxOutstandingR2T)
	case "DataPDUInOrder":
		return boolStr(p.DataPDUInOrder)
	case "DataSequenceInOrder":
		return boolStr(p.DataSequenceInOrder)
	case "ErrorRecoveryLevel":
		return strconv.Itoa(p.ErrorRecoveryLevel)
	case "MaxRecvDataSegmentLength":
		return strconv.Itoa(p.MaxRecvDataSegmentLengthLocal)
	case "IFMarker", "OFMarker":
		return "No"
	}
	return ""
}

// set stores an agreed value.
func (p *Params) set(key, v string) error {
	r := rules[key]
	switch r.kind {
	case kindListDigest:
		var on bool
		switch v {
		case "CRC32C":
			on = true
		case "None":
		default:
			return fmt.Errorf("%w: %s=%q", ErrBadValue, key, v)
		}
		if key == "HeaderDigest" {
			p.HeaderDigest = on
		} else {
			p.DataDigest = on
		}
		return nil
	case kindAnd, kindOr:
		b, err := parseBool(v)
		if err != nil {
			return err
		}
		switch key {
		case "InitialR2T":
			p.InitialR2T = b
		case "ImmediateData":
			p.ImmediateData = b
		case "DataPDUInOrder":
			p.DataPDUInOrder = b
		case "DataSequenceInOrder":
			p.DataSequenceInOrder = b
		case "IFMarker", "OFMarker":
			if b {
				return fmt.Errorf("%w: markers are not supported", ErrBadValue)
			}
		}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < r.min || n > r.max {
		return fmt.Errorf("%w: %s=%q (want %d..%d)", ErrBadValue, key, v, r.min, r.max)
	}
	switch key {
	case "MaxConnections":
		p.MaxConnections = n
	case "FirstBurstLength":
		p.FirstBurstLength = n
	case "MaxBurstLength":
		p.MaxBurstLength = n
	case "DefaultTime2Wait":
		p.DefaultTime2Wait = n
	case "DefaultTime2Retain":
		p.DefaultTime2Retain = n
	case "MaxOutstandingR2T":
		p.MaxOutstandingR2T = n
	case "ErrorRecoveryLevel":
		p.ErrorRecoveryLevel = n
	case "MaxRecvDataSegmentLength":
		p.MaxRecvDataSegmentLengthPeer = n
	}
	return nil
}

// Negotiate is the responder's side for one offered key: given the
// originator's value and our own preferences in p, it returns the value to
// answer with and records the agreed value in p. For
// MaxRecvDataSegmentLength (declarative) it records the peer's limit and
// answers with our own. An unknown key yields NotUnderstood; a malformed
// value yields Reject (and ErrBadValue, which the caller may log).
func (p *Params) Negotiate(key, offer string) (string, error) {
	r, ok := rules[key]
	if !ok {
		return ValueNotUnderstood, nil
	}
	mine := p.get(key)
	switch r.kind {
	case kindListDigest:
		// The responder picks the first value of the list it supports;
		// tristore supports both, so the originator's preference wins.
		for _, o := range SplitList(offer) {
			if o == "None" || o == "CRC32C" {
				_ = p.set(key, o)
				return o, nil
			}
		}
		return ValueReject, fmt.Errorf("%w: %s=%q", ErrBadValue, key, offer)
	case kindAnd, kindOr:
		ob, err := parseBool(offer)
		if err != nil {
			return ValueReject, err
		}
		mb, _ := parseBool(mine)
		res := ob && mb
		if r.kind == kindOr {
			res = ob || mb
		}
		if key == "IFMarker" || key == "OFMarker" {
			res = false
		}
		_ = p.set(key, boolStr(res))
		return boolStr(res), nil
	case kindDeclarative:
		if err := p.set(key, offer); err != nil {
			return ValueReject, err
		}
		return mine, nil
	}
	on, err := strconv.Atoi(offer)
	if err != nil || on < r.min || on > r.max {
		return ValueReject, fmt.Errorf("%w: %s=%q", ErrBadValue, key, offer)
	}
	mn, _ := strconv.Atoi(mine)
	res := min(on, mn)
	if r.kind == kindMax {
		res = max(on, mn)
	}
	_ = p.set(key, strconv.Itoa(res))
	return strconv.Itoa(res), nil
}

// Apply is the originator's side: it records the value the responder
// answered for a key we offered. For MaxRecvDataSegmentLength it records the
// responder's declared limit.
func (p *Params) Apply(key, answer string) error {
	if _, ok := rules[key]; !ok {
		return nil // not an operational key; ignore
	}
	if answer == ValueNotUnderstood || answer == ValueIrrelevant {
		return nil // keep defaults
	}
	if answer == ValueReject {
		return fmt.Errorf("%w: responder rejected %s", ErrBadValue, key)
	}
	return p.set(key, answer)
}

// Offer returns the keys an originator (initiator) proposes, in a stable
// order, from its preferred values in p. Digests are offered as a list with
// the preferred one first so either answer is acceptable.
func (p *Params) Offer() []KV {
	hd, dd := "None,CRC32C", "None,CRC32C"
	if p.HeaderDigest {
		hd = "CRC32C,None"
	}
	if p.DataDigest {
		dd = "CRC32C,None"
	}
	return []KV{
		{"HeaderDigest", hd},
		{"DataDigest", dd},
		{"MaxRecvDataSegmentLength", p.get("MaxRecvDataSegmentLength")},
		{"InitialR2T", boolStr(p.InitialR2T)},
		{"ImmediateData", boolStr(p.ImmediateData)},
		{"FirstBurstLength", strconv.Itoa(min(p.FirstBurstLength, p.MaxBurstLength))},
		{"MaxBurstLength", p.get("MaxBurstLength")},
		{"MaxOutstandingR2T", p.get("MaxOutstandingR2T")},
		{"DataPDUInOrder", boolStr(p.DataPDUInOrder)},
		{"DataSequenceInOrder", boolStr(p.DataSequenceInOrder)},
		{"ErrorRecoveryLevel", p.get("ErrorRecoveryLevel")},
		{"DefaultTime2Wait", p.get("DefaultTime2Wait")},
		{"DefaultTime2Retain", p.get("DefaultTime2Retain")},
		{"MaxConnections", p.get("MaxConnections")},
	}
}

// Normalize enforces the cross-key rule FirstBurstLength <= MaxBurstLength
// (RFC 7143 §13.14) on one side's own values. Offer already clamps what it
// proposes; when both sides propose consistent values the negotiated ones
// are consistent too, so neither side needs to change them afterwards
// (doing so on one side only would make the sides disagree about how much
// unsolicited data is coming).
func (p *Params) Normalize() {
	if p.FirstBurstLength > p.MaxBurstLength {
		p.FirstBurstLength = p.MaxBurstLength
	}
}

// ValidName performs a light validity check of an iSCSI name (iqn., eui. or naa.).
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 223 {
		return false
	}
	l := strings.ToLower(name)
	return strings.HasPrefix(l, "iqn.") || strings.HasPrefix(l, "eui.") || strings.HasPrefix(l, "naa.")
}
