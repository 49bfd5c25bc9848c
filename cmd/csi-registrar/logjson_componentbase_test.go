package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	logsjson "k8s.io/component-base/logs/json"
)

// TestJSONFormatMatchesComponentBase logs the same records through
// jsonHandler and through k8s.io/component-base/logs/json's logger (what
// --logging-format=json is in kube-apiserver, the kubelet and upstream's
// node-driver-registrar; a test-only dependency, not linked into the binary)
// behind go-logr's slog bridge, and expects the same lines but for ts, which
// must be a number in both.
func TestJSONFormatMatchesComponentBase(t *testing.T) {
	var ours, theirs bytes.Buffer
	cb, _ := logsjson.NewJSONLogger(5, zapcore.AddSync(&theirs), nil, nil)
	for _, log := range []*slog.Logger{newLogger(logConfig{v: 5, format: "json"}, &ours), slog.New(logr.ToSlogHandler(cb))} {
		logSample(log)
		logGroups(log)
		log.Info("invalid UTF-8", "s", "a\xffb")
	}
	o := strings.Split(strings.TrimSuffix(ours.String(), "\n"), "\n")
	c := strings.Split(strings.TrimSuffix(theirs.String(), "\n"), "\n")
	if len(o) != len(c) {
		t.Fatalf("%d lines, component-base wrote %d:\n%s\n---\n%s", len(o), len(c), ours.String(), theirs.String())
	}
	withoutTS := func(line string) string {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		var ts float64
		if err := json.Unmarshal(m["ts"], &ts); err != nil || ts < 1e12 {
			t.Errorf("ts %s is not milliseconds since the epoch: %s", m["ts"], line)
		}
		// The rest of the line, key order included.
		return line[strings.Index(line, `,"caller"`):]
	}
	for i := range o {
		if got, want := withoutTS(o[i]), withoutTS(c[i]); got != want {
			t.Errorf("line %d:\n ours           %s\n component-base %s", i, got, want)
		}
	}
}
