package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// jsonHandler is a slog.Handler that writes the JSON format of Kubernetes
// components (k8s.io/component-base/logs/json, --logging-format=json), so that
// the pipelines that parse kube-apiserver or kubelet logs parse ours:
//
//	{"ts":1700000797611.4,"caller":"registrar/registrar.go:123","msg":"registration socket created","v":0,"reason":"start"}
//
// as component-base writes it: ts in milliseconds since the epoch (a float;
// component-base's epochMillisTimeEncoder), caller as dir/file.go:line,
// msg, then the attributes of With (and the groups of WithGroup, opened there
// as zap opens a namespace), v (the verbosity) on every line below Error, and
// the record's attributes in order. Error lines have no v. Durations are strings ("1.5s"), errors their
// message; there is no level and no time key.
//
// component-base builds it on go.uber.org/zap and go-logr/zapr; this is the
// same output (TestJSONFormatMatchesComponentBase compares the two) without
// them: zap, zapr and the slog bridge add 2.2 MB to a minimal program.
type jsonHandler struct {
	out    *lockedWriter
	minLvl slog.Level
	// pre holds what WithAttrs and WithGroup added, encoded: attributes, and
	// groups opened ("name":{) as zap's Namespace opens them, so that later
	// fields, v included, go inside. open counts the braces owed.
	pre     []byte
	open    int
	inGroup bool // pre ends with a group just opened: no comma before the next field
}

// lockedWriter serializes the writes of a handler and its With* clones.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(b)
	return err
}

func newJSONHandler(w io.Writer, v int) *jsonHandler {
	return &jsonHandler{out: &lockedWriter{w: w}, minLvl: slog.Level(-v)}
}

func (h *jsonHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.minLvl }

func (h *jsonHandler) Handle(_ context.Context, r slog.Record) error {
	b := make([]byte, 0, 256)
	ts := r.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	b = append(b, `{"ts":`...)
	b = appendMillis(b, ts)
	if file, line := callerOf(r.PC); file != "" {
		b = append(b, `,"caller":`...)
		b = appendJSONString(b, shortCaller(file)+":"+strconv.Itoa(line))
	}
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, r.Message)
	b = append(b, h.pre...)
	first := h.inGroup
	if r.Level < slog.LevelError {
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"v":`...)
		b = strconv.AppendInt(b, int64(verbosityOf(r.Level)), 10)
		first = false
	}
	r.Attrs(func(a slog.Attr) bool {
		b, first = appendAttr(b, a, first)
		return true
	})
	for range h.open {
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	return h.out.write(b)
}

func (h *jsonHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	c.pre = slices.Clone(h.pre)
	for _, a := range attrs {
		c.pre, c.inGroup = appendAttr(c.pre, a, c.inGroup)
	}
	return &c
}

func (h *jsonHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.pre = slices.Clone(h.pre)
	if !c.inGroup {
		c.pre = append(c.pre, ',')
	}
	c.pre = appendJSONString(c.pre, name)
	c.pre = append(c.pre, `:{`...)
	c.open++
	c.inGroup = true
	return &c
}

// appendAttr appends ,"key":value (without the comma when first) and reports
// whether the next attribute is still the first of its object.
func appendAttr(b []byte, a slog.Attr, first bool) ([]byte, bool) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b, first
	}
	if a.Value.Kind() == slog.KindGroup {
		attrs := a.Value.Group()
		if len(attrs) == 0 {
			return b, first
		}
		if a.Key == "" { // inlined, as slog specifies
			for _, ga := range attrs {
				b, first = appendAttr(b, ga, first)
			}
			return b, first
		}
		if !first {
			b = append(b, ',')
		}
		b = appendJSONString(b, a.Key)
		b = append(b, `:{`...)
		inner := true
		for _, ga := range attrs {
			b, inner = appendAttr(b, ga, inner)
		}
		return append(b, '}'), false
	}
	if !first {
		b = append(b, ',')
	}
	b = appendJSONString(b, a.Key)
	b = append(b, ':')
	return appendJSONValue(b, a.Value), false
}

// appendJSONValue encodes v as zap's JSON encoder does with component-base's
// settings.
func appendJSONValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendJSONString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		f := v.Float64()
		switch {
		case math.IsNaN(f):
			return append(b, `"NaN"`...)
		case math.IsInf(f, 1):
			return append(b, `"+Inf"`...)
		case math.IsInf(f, -1):
			return append(b, `"-Inf"`...)
		}
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return appendJSONString(b, v.Duration().String())
	case slog.KindTime:
		return appendMillis(b, v.Time())
	}
	switch x := v.Any().(type) {
	case nil:
		return append(b, "null"...)
	case error:
		return appendJSONString(b, x.Error())
	case fmt.Stringer:
		return appendJSONString(b, x.String())
	}
	j, err := json.Marshal(v.Any())
	if err != nil {
		return appendJSONString(b, fmt.Sprintf("%+v", v.Any()))
	}
	return append(b, j...)
}

// appendMillis appends t as float milliseconds since the epoch.
func appendMillis(b []byte, t time.Time) []byte {
	return strconv.AppendFloat(b, float64(t.UnixNano())/float64(time.Millisecond), 'f', -1, 64)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// verbosityOf maps a slog level to klog's verbosity: Debug (-4) is V(4);
// Info and Warn are V(0).
func verbosityOf(l slog.Level) int {
	if l >= slog.LevelInfo {
		return 0
	}
	return int(slog.LevelInfo - l)
}

func callerOf(pc uintptr) (string, int) {
	if pc == 0 {
		return "", 0
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return f.File, f.Line
}

// shortCaller is zap's short caller: the last directory and the file.
func shortCaller(file string) string {
	dir, base := filepath.Split(file)
	return filepath.Join(filepath.Base(dir), base)
}
