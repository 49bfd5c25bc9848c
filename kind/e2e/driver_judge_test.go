//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/mdtable"
	"github.com/csi-registrar/csi-registrar/kind/e2e/kubeletlog"
)

// How the driver suite judges a case: by what the kubelet and the API say,
// never by a registrar's logs, so that the same run judges csi-registrar,
// upstream node-driver-registrar or a driver that registers in-process. The
// registration itself is proven by the CSINode entry, the Node annotation
// and the registration socket in plugins_registry; that the kubelet made a
// new attempt comes from its own log.

// kubeletAttempts counts the kubelet's registration attempts of driver on
// node since t (its log), and returns the kubelet's log lines about the
// driver or plugin registration errors since then, for a diagnosis.
func kubeletAttempts(ctx context.Context, node, driver string, since time.Time) (int, []string, error) {
	log, err := cl.Provider.KubeletLog(ctx, node, 5000)
	if err != nil {
		return 0, nil, err
	}
	n, related := kubeletlog.Attempts(log, driver, since)
	return n, related, nil
}

// waitKubeletAttempt waits until the kubelet on node logged a new attempt
// to register the driver since t0 and returns when it was seen.
func waitKubeletAttempt(t *testing.T, ctx context.Context, node string, t0 time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	var last error
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, _, err := kubeletAttempts(ctx, node, dut.name, t0)
		if err == nil && n > 0 {
			return time.Since(t0)
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Fatalf("the kubelet on %s logged no new attempt to register %s (%q) within %s (%v)", node, dut.name, kubeletlog.RegisterLine(dut.name), timeout, last)
	return 0
}

// The results of the driver cases, one per case, for the table.
type caseResult struct {
	Case     string
	Verdict  string // pass, FAIL, skip
	Note     string
	Restarts map[string]int32 // container -> restarts during the case, summed over the workload's pods
	Times    []caseTime
}

type caseTime struct {
	What    string
	Seconds float64
}

type driverRun struct {
	Driver     string // the -driver argument, as given
	Registrar  string // the registrar image under test (or "in-process")
	Kubernetes string
	Provider   string
	Cases      []caseResult
}

var (
	driverResultsFlag = flag.String("driver-results", "", "write the driver cases' results (JSON) to this file, for -driver-table")
	driverTableFlag   = flag.String("driver-table", "", "comma-separated result files of -driver-results: print them side by side as one table and exit (no cluster)")
	results           driverRun
	// notRegisteredAtStart: the cases (by test name) that found the driver
	// not registered when they began.
	notRegisteredAtStart = map[string]bool{}
)

// workloadRestarts sums the restartCount of each container name over the
// workload's pods.
func workloadRestarts(ctx context.Context) map[string]int32 {
	m := map[string]int32{}
	pods, err := cl.Pods(ctx)
	if err != nil {
		return m
	}
	for _, p := range pods {
		for c, s := range podContainers(p) {
			m[c] += s.RestartCount
		}
	}
	return m
}

// driverCase runs one case and records its result. expected is the
// container the case itself restarts (its fault), if any.
func driverCase(t *testing.T, name, expected string, f func(*testing.T)) bool {
	return t.Run(name, func(t *testing.T) {
		before := workloadRestarts(context.Background())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := caseResult{Case: name, Verdict: "pass", Restarts: map[string]int32{}}
			switch {
			case t.Skipped():
				r.Verdict = "skip"
			case t.Failed():
				r.Verdict = "FAIL"
			}
			var through []string
			for c, n := range workloadRestarts(ctx) {
				if d := n - before[c]; d > 0 {
					r.Restarts[c] = d
					if c != expected {
						through = append(through, fmt.Sprintf("%s (%d)", c, d))
					}
				}
			}
			sort.Strings(through)
			if notRegisteredAtStart[t.Name()] {
				r.Note = "not registered at the start of the case (as an earlier case left it)"
			}
			if len(through) > 0 && r.Verdict == "pass" {
				r.Note = "recovered only through a container restart: " + strings.Join(through, ", ")
				t.Logf("%s: %s", name, r.Note)
			}
			timingsMu.Lock()
			for _, x := range timings {
				if x.scope == name {
					r.Times = append(r.Times, caseTime{x.what, x.d.Seconds()})
				}
			}
			timingsMu.Unlock()
			results.Cases = append(results.Cases, r)
		})
		f(t)
	})
}

func writeDriverResults() error {
	if *driverResultsFlag == "" {
		return nil
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*driverResultsFlag, b, 0o644)
}

// printDriverTable prints the runs in files side by side: case × registrar,
// each with its verdict, the kubelet's times (CSINode entry gone / back,
// from the fault) and the container restarts during the case.
func printDriverTable(files string) int {
	var runs []driverRun
	for _, f := range strings.Split(files, ",") {
		b, err := os.ReadFile(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var r driverRun
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			return 1
		}
		runs = append(runs, r)
	}
	fmt.Print(driverTable(runs))
	return 0
}

func driverTable(runs []driverRun) string {
	// Rows: driver and case; columns: registrar.
	var regs, rows []string
	cell := map[[2]string]*caseResult{}
	for i := range runs {
		r := &runs[i]
		if !slices.Contains(regs, r.Registrar) {
			regs = append(regs, r.Registrar)
		}
		for j := range r.Cases {
			row := filepath.Base(r.Driver) + " " + r.Cases[j].Case
			if !slices.Contains(rows, row) {
				rows = append(rows, row)
			}
			cell[[2]string{row, r.Registrar}] = &r.Cases[j]
		}
	}
	tb := mdtable.Table{Header: []string{"driver, case"}}
	for _, reg := range regs {
		tb.Header = append(tb.Header, reg, "restarts", "CSINode entry (s)")
	}
	var notes []string
	for _, row := range rows {
		cells := []string{row}
		for _, reg := range regs {
			c := cell[[2]string{row, reg}]
			if c == nil {
				cells = append(cells, "-", "-", "-")
				continue
			}
			v := c.Verdict
			if c.Note != "" {
				v += " *"
				notes = append(notes, fmt.Sprintf("%s, %s: %s", row, reg, c.Note))
			}
			var rs []string
			for k, n := range c.Restarts {
				rs = append(rs, fmt.Sprintf("%s %d", k, n))
			}
			sort.Strings(rs)
			if len(rs) == 0 {
				rs = []string{"0"}
			}
			var ts []string
			for _, x := range c.Times {
				if strings.Contains(x.What, "CSINode entry") {
					_, w, _ := strings.Cut(x.What, "-> ")
					w = strings.TrimPrefix(w, "CSINode entry ")
					ts = append(ts, fmt.Sprintf("%s %.2f", w, x.Seconds))
				}
			}
			if len(ts) == 0 {
				ts = []string{"-"}
			}
			cells = append(cells, v, strings.Join(rs, ", "), strings.Join(ts, "; "))
		}
		tb.Rows = append(tb.Rows, cells)
	}
	var b strings.Builder
	b.WriteString(tb.Markdown())
	for _, r := range runs {
		fmt.Fprintf(&b, "%s with %s: Kubernetes %s, provider %s\n", filepath.Base(r.Driver), r.Registrar, r.Kubernetes, r.Provider)
	}
	for _, n := range notes {
		b.WriteString("* " + n + "\n")
	}
	return b.String()
}
