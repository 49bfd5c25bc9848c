package registrar

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// processStats are the series every Prometheus user expects of a Go process,
// with the names and meanings of client_golang's process and Go collectors.
type processStats struct {
	cpuSeconds    float64 // user + system CPU time
	residentBytes uint64
	startTime     float64 // seconds since the epoch
	openFDs       uint64
}

// userHZ is the unit of the CPU times and start time in /proc/<pid>/stat
// (USER_HZ, sysconf(_SC_CLK_TCK)): 100 on every Linux architecture Go
// supports, and what client_golang's procfs assumes too.
const userHZ = 100

// readProcessStats reads /proc/self/stat, /proc/stat and /proc/self/fd.
func readProcessStats() (processStats, error) {
	var ps processStats
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return ps, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after it are separated by single spaces.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return ps, errors.New("/proc/self/stat: no command name")
	}
	f := strings.Fields(string(stat[end+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	const utime, stime, starttime, rss = 14 - 3, 15 - 3, 22 - 3, 24 - 3
	if len(f) <= rss {
		return ps, fmt.Errorf("/proc/self/stat: %d fields", len(f)+2)
	}
	num := func(i int) uint64 {
		if err != nil {
			return 0
		}
		var n uint64
		n, err = strconv.ParseUint(f[i], 10, 64)
		return n
	}
	ps.cpuSeconds = float64(num(utime)+num(stime)) / userHZ
	startTicks := num(starttime)
	ps.residentBytes = num(rss) * uint64(os.Getpagesize())
	if err != nil {
		return ps, fmt.Errorf("/proc/self/stat: %w", err)
	}
	boot, err := bootTime()
	if err != nil {
		return ps, err
	}
	ps.startTime = float64(boot) + float64(startTicks)/userHZ
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return ps, err
	}
	// ReadDir's own descriptor of the directory is gone when it returns.
	ps.openFDs = uint64(len(fds))
	return ps, nil
}

// bootTime is the btime line of /proc/stat: the boot time in seconds since
// the epoch.
func bootTime() (uint64, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(stat)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("/proc/stat has no btime line")
}

// processStatsCache keeps a reading of /proc for processStatsMaxAge. A
// reading lists /proc/self/fd, one entry per open connection: a client that
// floods /metrics over many connections must not make every request list
// them all again.
type processStatsCache struct {
	mu  sync.Mutex
	at  time.Time
	ps  processStats
	err error
}

const processStatsMaxAge = time.Second

func (c *processStatsCache) get() (processStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.at.IsZero() || now.Sub(c.at) >= processStatsMaxAge {
		c.ps, c.err = readProcessStats()
		c.at = now
	}
	return c.ps, c.err
}

// writeProcessMetrics appends the process_* and go_goroutines series. When
// /proc cannot be read, the process_* series are left out (a scrape then
// shows them missing, rather than wrong).
func writeProcessMetrics(b *strings.Builder, proc *processStatsCache) {
	if ps, err := proc.get(); err == nil {
		family(b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
		sampleFloat(b, "process_cpu_seconds_total", ps.cpuSeconds)
		family(b, "process_open_fds", "gauge", "Number of open file descriptors.")
		sampleFloat(b, "process_open_fds", float64(ps.openFDs))
		family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		sampleFloat(b, "process_resident_memory_bytes", float64(ps.residentBytes))
		family(b, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
		sampleFloat(b, "process_start_time_seconds", ps.startTime)
	}
	family(b, "go_goroutines", "gauge", "Number of goroutines that currently exist.")
	sampleFloat(b, "go_goroutines", float64(runtime.NumGoroutine()))
}

func sampleFloat(b *strings.Builder, name string, v float64) {
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	b.WriteByte('\n')
}
