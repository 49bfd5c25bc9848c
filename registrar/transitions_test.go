package registrar_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// transition is one row of the control loop's transition table: in stage,
// on event, the loop takes action and enters next. Each row names the test
// that drives the real Registrar (real sockets, the registrartest kubelet,
// the fake clock where time matters) through it and checks the stage and the
// side effects. The table is the one source: TestTransitions runs it, and
// docs/design.md shows it (TestTransitionTableInDesignDoc keeps the two
// equal; go test ./registrar -run TestTransitionTableInDesignDoc -update
// writes it).
type transition struct {
	id, stage, event, action, next string
	test                           func(*testing.T)
}

// "serving" is any stage with our socket served: waiting for kubelet,
// kubelet rejected, registered. "(Listen)" is any step that creates the
// registration socket: the first one, and every re-creation.
var transitions = []transition{
	{"driver-appears", "waiting for driver", "the driver socket appears and the driver answers GetPluginInfo", "ask the name beside the loop, then Listen", "waiting for kubelet", rowDriverWaitIsEventDriven},
	{"driver-name-probe", "waiting for driver", "with Options.DriverName: Probe answers ready (not ready: keep waiting)", "Listen", "waiting for kubelet", rowDriverNameWaitsForProbe},
	{"connection-timeout", "waiting for driver", "Options.ConnectionTimeout passes", "Run returns an error naming the address and the wait", "stopped", rowConnectionTimeout},
	{"driver-not-socket", "waiting for driver", "the driver address is not a socket", "Run returns an error naming the path", "stopped", rowDriverAddressNotASocket},
	{"driver-name-invalid", "waiting for driver", "the driver reports a name the kubelet cannot register", "Run returns a validation error; nothing created", "stopped", rowDriverNameValidated},
	{"listen-stale", "(Listen)", "a stale socket (nobody listens) is at the path", "remove it, Listen", "waiting for kubelet", rowStaleSocketReplaced},
	{"listen-conflict", "(Listen)", "another process serves a socket at the path; later it removes it", "leave it, retry with backoff; Listen once the path is freed", "socket conflict → waiting for kubelet", rowLiveSocketNotRemoved},
	{"listen-not-socket", "(Listen)", "a regular file, directory or symlink is at the path", "leave it, retry with backoff", "socket path is not a socket", rowNonSocketRefused},
	{"listen-dir-missing", "(Listen)", "the registration directory is missing; it comes back", "retry with backoff, watch the directory again", "registration directory missing → waiting for kubelet", rowRegistrationDirectoryMissing},
	{"notify-true", "serving", "GetInfo, then Notify(true)", "reset the backoff", "registered", rowRegistrationAsKubeletDoes},
	{"notify-false", "serving", "Notify(false) from a kubelet that does not retry (or not known to)", "re-create after backoff (3 s the first time while the kubelet's kind is unknown, then 2 s, 4 s … up to --registration-retry-max); infer \"never\"", "kubelet rejected → waiting for kubelet", rowRejectionRecreatesSocket},
	{"kubelet-retries", "kubelet rejected", "GetInfo before the re-creation; later rejections; silence for 2m30s", "infer \"retries itself\" and keep the socket; re-create when it falls silent", "kubelet rejected", rowKubeletThatRetriesKeepsSocket},
	{"no-getinfo", "waiting for kubelet", "no GetInfo within Options.KubeletWait", "re-create after backoff", "waiting for kubelet", rowKubeletSilenceRecreatesSocket},
	{"no-notify", "waiting for kubelet", "GetInfo, but no Notify within Options.KubeletWait", "re-create after backoff", "waiting for kubelet", rowGetInfoWithoutNotifyRecreatesSocket},
	{"socket-deleted", "serving", "our socket is deleted (file event)", "Listen at once", "waiting for kubelet", rowDeletedSocketRecreated},
	{"socket-deleted-missed", "serving", "our socket is deleted and the event is lost (reconcile tick)", "Listen", "waiting for kubelet", rowReconcileFindsMissedDelete},
	{"socket-replaced", "serving", "another process replaces our socket with its own", "stop serving, leave its file, retry with backoff", "socket conflict", rowReplacedSocketNotFought},
	{"watcher-error", "any", "file watcher error (inotify queue overflow)", "reconcile now, with a GetInfo of our own", "as the reconcile finds", rowWatcherErrorReconciles},
	{"self-check", "serving", "the reconcile's own GetInfo on our socket", "answered; neither counted nor taken for the kubelet's", "unchanged", rowSelfCheckIsNotTheKubelet},
	{"driver-outage", "serving", "the driver stops (socket removed, or Probe fails at a reconcile), then answers again", "driver_reachable 0, then 1; each logged once", "unchanged", rowDriverOutageLogged},
	{"readyz-follows-driver", "registered", "the driver goes and comes back; the loop ends", "/readyz 503 naming Probe, then 200; /healthz 503 once the loop ended", "unchanged → stopped", rowHealthFollowsDriverAndLoop},
	{"driver-renamed", "serving", "the driver restarts under another name", "remove our socket, register the new name", "waiting for kubelet", rowDriverRenamed},
	{"driver-renamed-invalid", "serving", "the driver restarts with a name the kubelet cannot register", "remove our socket; Run returns a validation error", "stopped", rowDriverRenamedInvalid},
	{"exit", "any", "ctx ends (without --rolling-update; with it the handover leaves: docs/design.md, \"The handover\")", "stop serving, remove our socket", "stopped", rowExitRemovesSocket},
	{"exit-replaced", "any", "ctx ends after another file took our path", "stop serving, leave that file", "stopped", rowExitKeepsReplacedFile},
	{"run-twice", "stopped", "Run is called again", "return an error", "stopped", rowRunOnceThenStopped},
}

// TestTransitions runs every row's test. A row without a test does not
// compile; a test of this package named row* that no row lists fails here.
func TestTransitions(t *testing.T) {
	seen := map[string]bool{}
	for _, tr := range transitions {
		if seen[tr.id] {
			t.Errorf("row id %q is used twice", tr.id)
		}
		seen[tr.id] = true
		t.Run(tr.id, tr.test)
	}
	listed := map[string]bool{}
	for _, tr := range transitions {
		listed[funcName(tr.test)] = true
	}
	for _, name := range declaredRowTests(t) {
		if !listed[name] {
			t.Errorf("%s tests a transition that no row of the table lists: add its row to transitions", name)
		}
	}
}

var updateDoc = flag.Bool("update", false, "write the transition table into docs/design.md")

const (
	docPath  = "../docs/design.md"
	docBegin = "<!-- transitions: generated from registrar/transitions_test.go; do not edit -->"
	docEnd   = "<!-- end of transitions -->"
)

// TestTransitionTableInDesignDoc checks that docs/design.md shows this table.
func TestTransitionTableInDesignDoc(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	want := docBegin + "\n\n" + renderTransitions() + "\n" + docEnd
	re := regexp.MustCompile("(?s)" + regexp.QuoteMeta(docBegin) + ".*?" + regexp.QuoteMeta(docEnd))
	if !re.Match(doc) {
		t.Fatalf("%s has no block between %q and %q", docPath, docBegin, docEnd)
	}
	got := re.Find(doc)
	if string(got) == want {
		return
	}
	if *updateDoc {
		if err := os.WriteFile(docPath, re.ReplaceAllLiteral(doc, []byte(want)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s does not show the transition table the tests run; run go test ./registrar -run TestTransitionTableInDesignDoc -update. Want:\n%s", docPath, want)
}

// renderTransitions is the table as Markdown.
func renderTransitions() string {
	var b strings.Builder
	b.WriteString("| stage | event | action | next stage | test |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for _, tr := range transitions {
		b.WriteString("| " + cell(tr.stage) + " | " + cell(tr.event) + " | " + cell(tr.action) + " | " + cell(tr.next) +
			" | `" + tr.id + "` (" + funcName(tr.test) + ") |\n")
	}
	return b.String()
}

// funcName is the name of a function of this package, e.g. "rowExit".
func funcName(f func(*testing.T)) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

// declaredRowTests lists the functions named row* declared in this directory's test
// files: the tests of transitions.
func declaredRowTests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && isRowTest(fd.Name.Name) {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names
}

// isRowTest reports whether name is that of a transition's test: row
// followed by an upper-case letter.
func isRowTest(name string) bool {
	rest, ok := strings.CutPrefix(name, "row")
	return ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z'
}
