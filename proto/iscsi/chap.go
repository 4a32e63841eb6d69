package iscsi

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// CHAP (RFC 1994, as used by RFC 7143 §12.1.3) with MD5, the only
// algorithm (CHAP_A=5) every iSCSI implementation supports.
//
// Exchange, one-way:
//
//	I->T AuthMethod=CHAP,None          T->I AuthMethod=CHAP
//	I->T CHAP_A=5                      T->I CHAP_A=5 CHAP_I=id CHAP_C=challenge
//	I->T CHAP_N=user CHAP_R=response   T checks response = MD5(id|secret|challenge)
//
// Mutual: the initiator also sends CHAP_I and CHAP_C with CHAP_N/CHAP_R and
// the target answers with its own CHAP_N and CHAP_R over the target secret.

// CHAPAlgorithmMD5 is the CHAP_A value for MD5.
const CHAPAlgorithmMD5 = "5"

// CHAPChallengeLen is the length of challenges we generate.
const CHAPChallengeLen = 16

// ErrCHAPEncoding is returned for a CHAP_C or CHAP_R that is not 0x-hex or 0b-base64.
var ErrCHAPEncoding = errors.New("iscsi: bad CHAP binary encoding")

// CHAPResponse computes MD5(id || secret || challenge).
func CHAPResponse(id byte, secret string, challenge []byte) []byte {
	h := md5.New()
	h.Write([]byte{id})
	h.Write([]byte(secret))
	h.Write(challenge)
	return h.Sum(nil)
}

// CHAPVerify checks a response in constant time.
func CHAPVerify(id byte, secret string, challenge, response []byte) bool {
	want := CHAPResponse(id, secret, challenge)
	return subtle.ConstantTimeCompare(want, response) == 1
}

// NewCHAPChallenge returns a random identifier and challenge.
func NewCHAPChallenge() (byte, []byte, error) {
	b := make([]byte, 1+CHAPChallengeLen)
	if _, err := rand.Read(b); err != nil {
		return 0, nil, err
	}
	return b[0], b[1:], nil
}

// EncodeBinary encodes binary as an iSCSI hex constant ("0x...").
func EncodeBinary(b []byte) string { return "0x" + hex.EncodeToString(b) }

// DecodeBinary decodes an iSCSI binary value: "0x"/"0X" hex or "0b"/"0B" base64.
func DecodeBinary(s string) ([]byte, error) {
	if len(s) < 3 {
		return nil, ErrCHAPEncoding
	}
	switch strings.ToLower(s[:2]) {
	case "0x":
		h := s[2:]
		if len(h)%2 == 1 {
			h = "0" + h
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCHAPEncoding, err)
		}
		return b, nil
	case "0b":
		b, err := base64.StdEncoding.DecodeString(s[2:])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCHAPEncoding, err)
		}
		return b, nil
	}
	return nil, ErrCHAPEncoding
}

// CHAPCredentials are a user name and secret for one direction.
type CHAPCredentials struct {
	User, Secret string
}

// Set reports whether the credentials are configured.
func (c CHAPCredentials) Set() bool { return c.User != "" }
