package csiplugin

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidateDriverName checks name against the CSI specification (at most 63
// characters, alphanumeric at both ends, dashes, dots and alphanumerics
// between) and against the API server's CSINode rule (a DNS-1123 subdomain
// once lower-cased). It is exactly as strict as those two rules together.
func ValidateDriverName(name string) error {
	bad := func(rule string) error {
		return &ValidationError{What: "driver name", Value: name, Rule: rule,
			Fix: "the driver must report (or the registrar's driver name option must give) a name such as \"hostpath.csi.k8s.io\""}
	}
	if name == "" {
		return bad("must not be empty")
	}
	pos := 0 // in characters: a multi-byte character is reported whole
	for i, r := range name {
		if r >= utf8.RuneSelf || !IsAlnum(byte(r)) && r != '-' && r != '.' {
			return bad(fmt.Sprintf("contains %s at position %d; only letters, digits, '-' and '.' are allowed", describeRune(name, i, r), pos))
		}
		pos++
	}
	// All ASCII from here: bytes are characters.
	if len(name) > MaxDriverNameLength {
		return bad(fmt.Sprintf("is %d characters long, the limit is %d", len(name), MaxDriverNameLength))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || !IsAlnum(label[0]) || !IsAlnum(label[len(label)-1]) {
			return bad("every dot-separated part must start and end with a letter or digit (a DNS-1123 subdomain once lower-cased)")
		}
	}
	return nil
}

// ValidateNodeID checks a node ID as the API server checks CSINode's
// nodeID: not empty (or blank), at most MaxNodeIDLength bytes. fix is the
// advice the error gives, in the caller's terms.
func ValidateNodeID(id, fix string) error {
	if strings.TrimSpace(id) == "" {
		return &ValidationError{What: "node ID", Value: id, Rule: "must not be empty", Fix: fix}
	}
	if len(id) > MaxNodeIDLength {
		return &ValidationError{What: "node ID", Value: id,
			Rule: fmt.Sprintf("is %d bytes long, the limit is %d", len(id), MaxNodeIDLength), Fix: fix}
	}
	return nil
}

// describeRune quotes the character r found at byte offset i of s; a byte
// that is not UTF-8 is shown as such.
func describeRune(s string, i int, r rune) string {
	if r == utf8.RuneError {
		if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
			return fmt.Sprintf("the byte 0x%02x (not UTF-8)", s[i])
		}
	}
	return strconv.QuoteRune(r)
}

// IsAlnum reports whether c is an ASCII letter or digit, the character class
// at both ends of driver names, DNS labels and label values.
func IsAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// IsDNSSubdomain reports whether s is a lower-case DNS-1123 subdomain: dot-
// separated labels of 1 to 63 lower-case letters, digits and '-', each
// alphanumeric at both ends. It does not check the total length (at most
// 253 characters); callers that need it check it themselves.
func IsDNSSubdomain(s string) bool {
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || !isLowerAlnum(label[0]) || !isLowerAlnum(label[len(label)-1]) {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isLowerAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
