// Package kubeletlog reads what the kubelet's own log says about plugin
// registration: the e2e driver suite's evidence that the kubelet made a new
// attempt to register a driver (for example after its restart, when the
// CSINode entry does not change), independent of any registrar's logs.
package kubeletlog

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// RegisterLine is what the kubelet's CSI handler logs (klog, at every
// verbosity) when it starts to register a driver: one attempt.
func RegisterLine(driver string) string {
	return "Register new plugin with name: " + driver + " at endpoint"
}

var header = regexp.MustCompile(`([IWEF])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})`)

// Time reads a klog header's time. The year and the zone are not in it:
// they are ref's.
func Time(line string, ref time.Time) (time.Time, bool) {
	m := header.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	var v [6]int // month, day, hour, minute, second, microsecond
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+2]) // decimal: "09" is nine
	}
	return time.Date(ref.Year(), time.Month(v[0]), v[1], v[2], v[3], v[4], v[5]*1000, ref.Location()), true
}

// Attempts counts the kubelet's attempts to register driver logged at or
// after since, and returns the lines since then about the driver or about a
// failed plugin registration.
func Attempts(log, driver string, since time.Time) (int, []string) {
	n := 0
	var related []string
	for _, line := range strings.Split(log, "\n") {
		at, ok := Time(line, since)
		if !ok || at.Before(since.Truncate(time.Microsecond)) {
			continue
		}
		if strings.Contains(line, RegisterLine(driver)) {
			n++
		}
		if strings.Contains(line, driver) || strings.Contains(line, "RegisterPlugin error") {
			related = append(related, strings.TrimSpace(line))
		}
	}
	return n, related
}

// The kubelet's volume operations whose failures VolumeErrors reads.
const (
	OpSetUp    = "MountVolume.SetUp failed"      // NodePublishVolume failed
	OpTearDown = "UnmountVolume.TearDown failed" // NodeUnpublishVolume failed
)

// VolumeError is one failure of a kubelet volume operation on a pod's
// volume, as its log tells it.
type VolumeError struct {
	PodUID string
	At     time.Time
	// Code and Desc are the driver's gRPC answer (code = NotFound desc =
	// ...) when the line carries one; Text is the error after the volume's
	// description otherwise.
	Code, Desc, Text string
}

// Cause is the driver's answer as one phrase: "NotFound: <desc>", or the
// kubelet's text when it carries no gRPC status.
func (e VolumeError) Cause() string {
	if e.Code != "" {
		return e.Code + ": " + e.Desc
	}
	return e.Text
}

var (
	podUID   = regexp.MustCompile(`\(UID: \\?"([^"\\]+)\\?"\)`)
	grpcCode = regexp.MustCompile(`code = (\w+) desc = (.*)$`)
)

// VolumeErrors returns the last failure of op (OpSetUp, OpTearDown) per
// pod UID logged at or after since (the kubelet retries: one cause a pod).
func VolumeErrors(log, op string, since time.Time) map[string]VolumeError {
	out := map[string]VolumeError{}
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, op)
		if i < 0 {
			continue
		}
		at, ok := Time(line, since)
		if !ok || at.Before(since.Truncate(time.Microsecond)) {
			continue
		}
		m := podUID.FindStringSubmatch(line[i:])
		if m == nil {
			continue
		}
		e := VolumeError{PodUID: m[1], At: at}
		rest := line[i:]
		if j := strings.Index(rest, ") : "); j >= 0 {
			rest = rest[j+4:]
		}
		rest = strings.TrimRight(strings.TrimSpace(rest), `"`)
		e.Text = rest
		if c := grpcCode.FindStringSubmatch(rest); c != nil {
			e.Code, e.Desc = c[1], strings.TrimRight(strings.TrimSpace(c[2]), `"`)
		}
		out[e.PodUID] = e
	}
	return out
}
