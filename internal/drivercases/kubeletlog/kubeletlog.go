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
