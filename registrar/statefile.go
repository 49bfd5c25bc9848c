package registrar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The state file (Options.StateFile) tells a process exec'd in the
// registrar's container (`register --mode=kubelet-registration-probe`, see
// ProbeState) what the running Registrar's Status is, without its HTTP
// endpoint. The Registrar rewrites it whenever what it holds changes, and
// removes it when Run returns if it is still the file it wrote.

// DefaultStateFile is the state file csi-registrar register keeps. /dev/shm
// is a tmpfs of the pod's own (the host's with hostIPC) that the container
// runtime mounts writable even with readOnlyRootFilesystem, so the
// manifests need no volume for it; the kubelet does not watch it.
const DefaultStateFile = "/dev/shm/csi-registrar.state"

// OptionStateFile names Options.StateFile in an *OptionError.
const OptionStateFile = Option("StateFile")

// stateFormat marks a state file; a file at the path without it was not
// written by a Registrar and is left alone.
const stateFormat = "csi-registrar-state/v1"

// stateRecord is the state file's content: only what ProbeState needs.
type stateRecord struct {
	Format string `json:"format"`
	// Stage is Stage.String(), with Status.String()'s "(ready to take the
	// registration back)" when standing by as a fallback.
	Stage string `json:"stage"`
	// Confirmed is what /readyz requires of the status: registered, or
	// standing by as a usable fallback (Status.Fallback).
	Confirmed bool      `json:"confirmed"`
	Since     time.Time `json:"since,omitzero"`
	PID       int       `json:"pid"`
	// Start is the process's start time (clock ticks after boot, field 22
	// of /proc/<pid>/stat): with PID, it tells the writer from a process
	// that got its pid later. 0: unknown.
	Start  uint64 `json:"start,omitempty"`
	Driver string `json:"driver,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func recordOf(st Status, pid int, start uint64) stateRecord {
	stage := st.Stage.String()
	if st.Stage == StageStandingBy && st.Fallback {
		stage += " (ready to take the registration back)"
	}
	return stateRecord{
		Format:    stateFormat,
		Stage:     stage,
		Confirmed: st.Stage == StageRegistered || (st.Stage == StageStandingBy && st.Fallback),
		Since:     st.Since,
		PID:       pid,
		Start:     start,
		Driver:    st.DriverName,
		Detail:    st.Detail,
	}
}

// String is the record as the probe prints it: "registered for 3s (driver
// x.example.com, pid 1)".
func (s stateRecord) String() string {
	var b strings.Builder
	b.WriteString(s.Stage)
	if !s.Since.IsZero() {
		fmt.Fprintf(&b, " for %s", time.Since(s.Since).Round(time.Second))
	}
	if s.Detail != "" {
		b.WriteString(": " + s.Detail)
	}
	b.WriteString(" (")
	if s.Driver != "" {
		b.WriteString("driver " + s.Driver + ", ")
	}
	fmt.Fprintf(&b, "pid %d)", s.PID)
	return b.String()
}

// checkStateFile checks Options.StateFile: empty (none), or an absolute path
// outside the registration directory, which the kubelet watches.
func checkStateFile(path, regDir string) error {
	switch {
	case path == "":
		return nil
	case !isStatePath(path):
		return invalid(OptionStateFile, path, statePathRule, "e.g. "+DefaultStateFile)
	case strings.HasPrefix(path, regDir+"/"):
		return invalid(OptionStateFile, path, "must not be under the registration directory "+regDir+", which the kubelet watches",
			"use a path of the container's own, e.g. "+DefaultStateFile)
	}
	return nil
}

const statePathRule = "must be an absolute, clean path"

func isStatePath(path string) bool { return filepath.IsAbs(path) && filepath.Clean(path) == path }

// stateWriter keeps the state file. Its write is the statusBox's publish
// hook, so calls are serialized by the box's mutex.
type stateWriter struct {
	path  string
	log   *slog.Logger
	pid   int
	start uint64

	last    stateRecord // what the file holds, once written
	written os.FileInfo // the file this process wrote last; nil: none
	off     bool        // a file of another kind or process is at path: left alone
	failing bool        // the last write failed (logged once until one succeeds)
}

// keepStateFile makes the status box write every change to
// Options.StateFile, from the current Status on, and returns the function
// that stops it and removes the file if it still is the one written here.
func (r *Registrar) keepStateFile() (stop func()) {
	if r.opts.StateFile == "" {
		return func() {}
	}
	w := &stateWriter{path: r.opts.StateFile, log: r.log, pid: os.Getpid()}
	w.start, _ = procStart(w.pid)
	r.status.publishTo(w.write)
	return func() {
		r.status.publishTo(nil)
		w.remove()
	}
}

// publishTo makes f receive the current Status and every later one, under
// the box's mutex; nil stops it.
func (b *statusBox) publishTo(f func(Status)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publish = f
	if f != nil {
		f(b.st)
	}
}

// write replaces the file with st's record (a temporary file renamed over
// it) unless it already holds it.
func (w *stateWriter) write(st Status) {
	rec := recordOf(st, w.pid, w.start)
	if w.off || (w.written != nil && rec == w.last) {
		return
	}
	if w.written == nil {
		if why := w.foreign(); why != "" {
			w.off = true
			w.log.Error("state file left alone: the kubelet-registration-probe mode cannot see this registrar", "stateFile", w.path,
				"reason", why, "fix", "give each registrar a state file of its own (--state-file, CSI_REGISTRAR_STATE_FILE)")
			return
		}
	}
	fi, err := w.replace(rec)
	if err != nil {
		if !w.failing {
			w.log.Error("cannot write the state file: the kubelet-registration-probe mode cannot see this registrar", "stateFile", w.path,
				"err", err, "fix", "make its directory writable, or choose another --state-file")
		}
		w.failing = true
		return
	}
	if w.failing {
		w.log.Info("state file written again", "stateFile", w.path)
	}
	w.failing, w.last, w.written = false, rec, fi
}

// foreign says why the file at the path, if any, is not one this
// Registrar may replace: one of another kind, or of another live
// registrar of this process namespace. "" if none is there or it is one
// left by a registrar that has exited.
func (w *stateWriter) foreign() string {
	fi, err := os.Lstat(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		return "" // replace reports what is wrong with the path
	}
	if !fi.Mode().IsRegular() {
		return "a " + fileKind(fi.Mode()) + " is at that path"
	}
	rec, err := readStateFile(w.path)
	if err != nil {
		return err.Error()
	}
	if rec.PID != w.pid && processAlive(rec.PID, rec.Start) == nil {
		return fmt.Sprintf("registrar pid %d, still running, keeps it", rec.PID)
	}
	return ""
}

func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeSocket:
		return "socket"
	}
	return "file that is not a regular file"
}

// replace writes rec to a temporary file in the same directory and renames
// it over the path: a reader sees the old record or the new one, whole.
func (w *stateWriter) replace(rec stateRecord) (os.FileInfo, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(w.path), "."+filepath.Base(w.path)+".*")
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		_, err = f.Write(append(data, '\n'))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), w.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return fi, nil
}

// remove removes the file if it still is the one this process wrote last:
// the same inode (numbers are reused, so) holding this process's record.
func (w *stateWriter) remove() {
	if w.written == nil {
		return
	}
	fi, err := os.Lstat(w.path)
	if err != nil || !os.SameFile(fi, w.written) {
		w.written = nil
		return
	}
	if rec, err := readStateFile(w.path); err == nil && rec.PID == w.pid && rec.Start == w.start {
		if err := os.Remove(w.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.log.Error("cannot remove the state file", "stateFile", w.path, "err", err)
		}
	}
	w.written = nil
}

// ProbeState reads the state file that a running Registrar keeps at path
// (Options.StateFile) in this container, and returns its state as one line,
// e.g. "registered for 3s (driver x.example.com, pid 1)". The error is nil
// only when the kubelet confirmed the registration of that Registrar, or
// it stands by as a usable fallback in the handover (what
// /readyz requires of the status; /readyz also asks the driver's Probe,
// which this does not). Otherwise the error says why: no state file, a
// writer that has exited (its pid gone, or now another process's), or the
// stage the Registrar is at. A path that is not absolute and clean is a
// *csiplugin.ValidationError.
func ProbeState(path string) (string, error) {
	if !isStatePath(path) {
		return "", &csiplugin.ValidationError{What: "state file", Value: path, Rule: statePathRule,
			Fix: "name the registrar's state file, e.g. " + DefaultStateFile}
	}
	rec, err := readStateFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no registrar is running in this container: no state file %s (a registrar writes it while it runs; "+
			"the registrar and the probe must have the same --state-file or CSI_REGISTRAR_STATE_FILE)", path)
	}
	if err != nil {
		return "", fmt.Errorf("cannot read the registrar's state: %w", err)
	}
	if err := processAlive(rec.PID, rec.Start); err != nil {
		return "", fmt.Errorf("no registrar is running in this container: %w; its state file %s says: %s", err, path, rec)
	}
	if !rec.Confirmed {
		return "", fmt.Errorf("not registered: %s", rec)
	}
	return rec.String(), nil
}

// readStateFile reads and decodes a state file.
func readStateFile(path string) (stateRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return stateRecord{}, err
	}
	var rec stateRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rec); err != nil || rec.Format != stateFormat || rec.PID <= 0 {
		return stateRecord{}, fmt.Errorf("%s is not a csi-registrar state file (%s with a pid)", path, stateFormat)
	}
	return rec, nil
}

// processAlive returns nil if pid is a running process that started at
// start (unless start is 0), else an error saying what it found.
func processAlive(pid int, start uint64) error {
	got, err := procStart(pid)
	switch {
	case errors.Is(err, errZombie) || errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("its writer, pid %d, has exited", pid)
	case err != nil:
		return fmt.Errorf("cannot tell whether its writer, pid %d, runs: %w", pid, err)
	case start != 0 && got != start:
		return fmt.Errorf("its writer, pid %d, has exited: that pid is another process now", pid)
	}
	return nil
}

var errZombie = errors.New("process has exited (zombie)")

// procStart returns when process pid started (field 22 of /proc/<pid>/stat,
// in clock ticks after boot).
func procStart(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(data[i+1:])) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 20", pid, len(f))
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, errZombie
	}
	return strconv.ParseUint(f[19], 10, 64)
}
