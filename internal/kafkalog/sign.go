package kafkalog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderSignature is the header of a reservation record that carries its
// signature when Config.SigningKey is set: the hex HMAC-SHA256 of the
// record's key, a zero byte and its value.
const HeaderSignature = "voucherd-sig"

// MismatchSignature is the reason (and metric label) of an event refused
// because its signature is missing or wrong.
const MismatchSignature = "bad_signature"

// MinSigningKeyLen is the shortest Config.SigningKey accepted.
const MinSigningKeyLen = 32

// signature returns the signature of a record with key and value.
func signature(signingKey, key, value []byte) []byte {
	m := hmac.New(sha256.New, signingKey)
	m.Write(key)
	m.Write([]byte{0})
	m.Write(value)
	sum := m.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// signed reports whether r carries the signature of its key and value
// under signingKey (compared in constant time), and why not.
func signed(signingKey []byte, r *kgo.Record) (string, bool) {
	var got []byte
	n := 0
	for _, h := range r.Headers {
		if h.Key == HeaderSignature {
			got = h.Value
			n++
		}
	}
	switch {
	case n == 0:
		return MismatchSignature + ": the record is not signed", false
	case n > 1:
		return MismatchSignature + ": the record has more than one signature", false
	case !hmac.Equal(got, signature(signingKey, r.Key, r.Value)):
		return MismatchSignature + ": the signature does not match", false
	}
	return "", true
}
