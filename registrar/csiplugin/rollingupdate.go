package csiplugin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The names and versions of the previous release's rolling-update mode
// (before the handover). This release announces none: it parses them to
// recognize a live announcement of that mode, which it stands by for during
// the upgrade from it, and node tools (doctor, status) name them
// (docs/design.md, "Upgrading from the announcements").
//
// An announcement socket is <prefix>_<instance>_<version>-reg.sock, where
// prefix is the driver name (or, above RollingUpdatePrefixMax characters, its
// first characters and a hash of the whole name), instance is
// InstanceID(pod UID) and version is the minor of the CSI version the
// announcement carries: "1.<version>.0". A driver name never contains '_', so
// no socket of node-driver-registrar, of csi-registrar without the mode, or
// of another driver matches.
const (
	// RollingUpdatePrefixMax is the longest driver name used whole in a
	// socket name: /var/lib/kubelet/plugins_registry/ (34 bytes) + prefix +
	// "_" + 8 + "_" + 13 digits + "-reg.sock" stays within
	// MaxSocketPathLength.
	RollingUpdatePrefixMax = 41
	// InstanceIDLength is the length of InstanceID's result.
	InstanceIDLength = 8
)

// InstanceID returns the short, fixed-length name of the instance whose
// pod has the given UID: the first 8 hex digits of its SHA-256.
func InstanceID(podUID string) string {
	sum := sha256.Sum256([]byte(podUID))
	return hex.EncodeToString(sum[:])[:InstanceIDLength]
}

// RollingUpdatePrefix returns the prefix of the driver's rolling-update
// socket names: the name itself when short enough, else its first
// characters and 8 hex digits of its SHA-256.
func RollingUpdatePrefix(driverName string) string {
	if len(driverName) <= RollingUpdatePrefixMax {
		return driverName
	}
	sum := sha256.Sum256([]byte(driverName))
	return driverName[:RollingUpdatePrefixMax-InstanceIDLength] + hex.EncodeToString(sum[:])[:InstanceIDLength]
}

// RollingUpdateSocketName returns the name of an announcement socket.
func RollingUpdateSocketName(driverName, instance string, version uint64) string {
	return RollingUpdatePrefix(driverName) + "_" + instance + "_" + strconv.FormatUint(version, 10) + RegistrationSocketSuffix
}

// ParseRollingUpdateSocketName reports whether name is an announcement
// socket of driverName, and if so whose and with which version.
func ParseRollingUpdateSocketName(driverName, name string) (instance string, version uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, RollingUpdatePrefix(driverName)+"_")
	if !ok {
		return "", 0, false
	}
	rest, ok = strings.CutSuffix(rest, RegistrationSocketSuffix)
	if !ok {
		return "", 0, false
	}
	instance, v, ok := strings.Cut(rest, "_")
	if !ok || !isInstanceID(instance) {
		return "", 0, false
	}
	version, err := strconv.ParseUint(v, 10, 64)
	if err != nil || strconv.FormatUint(version, 10) != v {
		return "", 0, false
	}
	return instance, version, true
}

// SplitRollingUpdateSocketName reports whether name has the shape of an
// announcement socket of any driver, and if so its prefix (the driver's
// name, or its RollingUpdatePrefix), instance and version: what a node tool
// tells of a socket that does not answer.
func SplitRollingUpdateSocketName(name string) (prefix, instance string, version uint64, ok bool) {
	rest, ok := strings.CutSuffix(name, RegistrationSocketSuffix)
	if !ok {
		return "", "", 0, false
	}
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return "", "", 0, false
	}
	j := strings.LastIndexByte(rest[:i], '_')
	if j <= 0 || strings.IndexByte(rest[:j], '_') >= 0 {
		return "", "", 0, false
	}
	instance, ok = rest[j+1:i], true
	v := rest[i+1:]
	version, err := strconv.ParseUint(v, 10, 64)
	if !isInstanceID(instance) || err != nil || strconv.FormatUint(version, 10) != v {
		return "", "", 0, false
	}
	return rest[:j], instance, version, true
}

// RollingUpdateVersion is the CSI version an announcement carries: the
// kubelet's CSI handler accepts a second registration of a name only with a
// strictly higher version, and compares major.minor.patch as numbers.
func RollingUpdateVersion(version uint64) string {
	return fmt.Sprintf("1.%d.0", version)
}

// ValidatePodUID checks the pod UID that turns the rolling update (the
// handover) on:
// what the downward API's metadata.uid gives (letters, digits and '-', at
// most 128 bytes). An unexpanded "$(POD_UID)" is refused with the fix.
func ValidatePodUID(uid string) error {
	const fix = "pass the pod's UID from the downward API: env POD_UID from fieldRef metadata.uid, then $(POD_UID)"
	if uid == "" {
		return &ValidationError{What: "pod UID", Value: uid, Rule: "must not be empty", Fix: fix}
	}
	if len(uid) > 128 {
		return &ValidationError{What: "pod UID", Value: uid, Rule: fmt.Sprintf("is %d bytes long, the limit is 128", len(uid)), Fix: fix}
	}
	for i := 0; i < len(uid); i++ {
		if !IsAlnum(uid[i]) && uid[i] != '-' {
			return &ValidationError{What: "pod UID", Value: uid,
				Rule: fmt.Sprintf("contains %q at byte %d; only letters, digits and '-' are allowed", uid[i], i), Fix: fix}
		}
	}
	return nil
}

func isInstanceID(s string) bool {
	if len(s) != InstanceIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
