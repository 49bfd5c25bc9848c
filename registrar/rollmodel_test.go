package registrar

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// modeRow is one row of the rolling-update mode's table: given a view, on
// an event, nextStep takes step, for a reason that contains why. The rows
// are the mode's table in docs/design.md (TestModeTableInDesignDoc keeps
// the two equal; go test ./registrar -run TestModeTableInDesignDoc -update
// writes it).
type modeRow struct {
	id    string
	given string // the view, for people
	view  modeView
	event modeEvent
	want  step   // kind and flags; reason is checked with why
	why   string // a part of the step's reason
}

// Instances of the rows: self is born at 2000; old before it, young after.
var (
	selfNew  = InstanceState{Instance: "self", Birth: 2000}
	selfReg  = InstanceState{Instance: "self", Birth: 2000, Version: 10, Confirmed: true, ConfirmedAt: 500}
	selfLeft = InstanceState{Instance: "self", Birth: 2000, Version: 10, Confirmed: true, ConfirmedAt: 500, Terminating: true}
	oldReg   = InstanceState{Instance: "old", Birth: 1000, Version: 9, Confirmed: true, ConfirmedAt: 400}
	young    = InstanceState{Instance: "young", Birth: 3000, Version: 11, Confirmed: true, ConfirmedAt: 600}
)

func peers(ps ...InstanceState) map[string]peerState {
	m := map[string]peerState{}
	for _, p := range ps {
		m[p.Instance] = peerState{st: p, known: true}
	}
	return m
}

func with(s InstanceState, f func(*InstanceState)) InstanceState { f(&s); return s }

var modeRows = []modeRow{
	// Start.
	{"first", "alone, no announcement yet", modeView{self: selfNew},
		modeEvent{kind: evBegin}, step{kind: stepAnnounce}, "no announcement yet"},
	{"discovering", "instances found on the node have not told their state yet", modeView{self: selfNew, discovering: true,
		peers: map[string]peerState{"old": {}}}, modeEvent{kind: evBegin}, step{kind: stepWait}, "first states"},
	{"newest-announces", "an older instance holds the registration", modeView{self: selfNew, peers: peers(oldReg)},
		modeEvent{kind: evDiscovered}, step{kind: stepAnnounce}, "no newer instance"},
	{"stand-by", "a newer live instance", modeView{self: selfReg, socket: true, peers: peers(young)},
		modeEvent{kind: evPeerState, other: "young", st: young}, step{kind: stepStandBy, other: "young"}, "newer instance"},
	{"restarted-container", "this instance restarted in its pod (its birth kept); a newer one runs", modeView{self: selfNew, peers: peers(young)},
		modeEvent{kind: evBegin}, step{kind: stepStandBy, other: "young"}, "newer instance"},
	{"still-standing-by", "standing by behind a newer live instance", modeView{self: selfReg, socket: true, standingBy: true, peers: peers(young)},
		modeEvent{kind: evPeerState, other: "young", old: young, st: young}, step{kind: stepNothing, other: "young"}, "already standing by"},
	// Take-backs.
	{"newer-left", "standing by; the newer instance's stream ends after it told its state", modeView{self: selfReg, socket: true, standingBy: true},
		modeEvent{kind: evPeerGone, other: "young", known: true}, step{kind: stepTakeBack, takeBack: "instance young left"}, "instance young left"},
	{"newer-leaving", "registered; a newer instance says it is terminating", modeView{self: selfReg, socket: true,
		peers: peers(with(young, func(s *InstanceState) { s.Terminating = true }))},
		modeEvent{kind: evPeerState, other: "young", old: young, st: with(young, func(s *InstanceState) { s.Terminating = true })},
		step{kind: stepTakeBack, takeBack: "newer instance young is terminating"}, "is terminating"},
	{"older-confirmed-after", "registered; the kubelet confirmed an older instance after this one (it restarted)", modeView{self: selfReg, socket: true,
		peers: peers(with(oldReg, func(s *InstanceState) { s.ConfirmedAt = 700 }))},
		modeEvent{kind: evPeerState, other: "old", old: oldReg, st: with(oldReg, func(s *InstanceState) { s.ConfirmedAt = 700 })},
		step{kind: stepTakeBack, takeBack: "the kubelet confirmed instance old (older, or leaving) after this one"}, "after this one"},
	{"confirmed-same-ms", "registered; an older instance confirmed in the same millisecond", modeView{self: selfReg, socket: true,
		peers: peers(with(oldReg, func(s *InstanceState) { s.ConfirmedAt = 500 }))},
		modeEvent{kind: evPeerState, other: "old", old: oldReg, st: with(oldReg, func(s *InstanceState) { s.ConfirmedAt = 500 })},
		step{kind: stepTakeBack, takeBack: "the kubelet confirmed instance old (older, or leaving) after this one"}, "after this one"},
	{"older-confirmed-before", "registered; an older instance's confirmation is earlier than this one's", modeView{self: selfReg, socket: true,
		peers: peers(oldReg)}, modeEvent{kind: evPeerState, other: "old", old: with(oldReg, func(s *InstanceState) { s.ConfirmedAt = 0 }), st: oldReg},
		step{kind: stepNothing}, "stands"},
	{"peer-failed", "registered; the kubelet failed another instance's announcement", modeView{self: selfReg, socket: true,
		peers: peers(with(young, func(s *InstanceState) { s.Failed = true }))},
		modeEvent{kind: evPeerState, other: "young", old: young, st: with(young, func(s *InstanceState) { s.Failed = true })},
		step{kind: stepTakeBack, takeBack: "instance young failed"}, "instance young failed"},
	{"settled", "the settle alarm was armed with a take-back pending", modeView{self: selfReg, socket: true, takeBack: "instance young failed"},
		modeEvent{kind: evSettled}, step{kind: stepTakeBack, takeBack: "instance young failed"}, "instance young failed"},
	{"socket-removed", "another instance's announcement is unlinked by name", modeView{self: selfReg, socket: true},
		modeEvent{kind: evSocketRemoved, other: "d_old_9-reg.sock"}, step{kind: stepWait, settle: true,
			takeBack: "socket d_old_9-reg.sock of another instance was removed", removedOnly: []string{"d_old_9-reg.sock"}}, "deregistration must pass"},
	{"unasked-removed", "another instance unlinks by name an announcement the kubelet never asked (its Withdrawn)", modeView{self: selfReg, socket: true,
		unasked: map[string]bool{"d_old_9-reg.sock": true}}, modeEvent{kind: evSocketRemoved, other: "d_old_9-reg.sock"}, step{kind: stepNothing}, "never asked"},
	{"settled-unasked", "settling after a removal that turned out to be of a socket the kubelet never asked", modeView{self: selfReg, socket: true,
		takeBack: "socket d_old_9-reg.sock of another instance was removed", removedOnly: []string{"d_old_9-reg.sock"},
		unasked: map[string]bool{"d_old_9-reg.sock": true}}, modeEvent{kind: evSettled}, step{kind: stepNothing}, "stands"},
	{"settled-mixed", "a take-back for another cause is pending; another instance's announcement is unlinked by name", modeView{self: selfReg, socket: true,
		takeBack: "instance young left"}, modeEvent{kind: evSocketRemoved, other: "d_old_9-reg.sock"},
		step{kind: stepWait, settle: true, takeBack: "socket d_old_9-reg.sock of another instance was removed"}, "deregistration must pass"},
	{"plain-removed", "a registrar without the mode unlinks the driver's `<name>-reg.sock`", modeView{self: selfReg, socket: true},
		modeEvent{kind: evPlainRemoved, other: "d-reg.sock"}, step{kind: stepAnnounceAtPlain}, "socket d-reg.sock (a registrar without the rolling-update mode) was removed"},
	{"plain-removed-discovering", "the driver's `<name>-reg.sock` is unlinked while the first states of the instances found are awaited", modeView{self: selfNew,
		discovering: true, peers: map[string]peerState{"old": {}}}, modeEvent{kind: evPlainRemoved, other: "d-reg.sock"},
		step{kind: stepWait, settle: true, takeBack: "socket d-reg.sock (a registrar without the rolling-update mode) was removed"}, "first states"},
	{"plain-taken", "announcing at the removed `<name>-reg.sock`, a file is there again (a registrar without the mode came back)", modeView{self: selfReg, socket: true},
		modeEvent{kind: evPlainTaken, other: "d-reg.sock"}, step{kind: stepWait, settle: true,
			takeBack: "the driver's plain socket path d-reg.sock was taken again before this instance announced there"}, "deregistration must pass"},
	{"own-plain-replaced", "our announcement at `<name>-reg.sock` deleted, and a file is there (node-driver-registrar starting: a rollback)",
		modeView{self: selfReg, plainTaken: true}, modeEvent{kind: evOwnRemoved, other: "d-reg.sock", plain: true},
		step{kind: stepYield, yielded: true}, "took the driver's plain socket path"},
	{"own-plain-deleted", "our announcement at `<name>-reg.sock` deleted, the path free", modeView{self: selfReg},
		modeEvent{kind: evOwnRemoved, other: "d-reg.sock", plain: true}, step{kind: stepWait, settle: true, plainLost: true,
			takeBack: "our socket d-reg.sock at the driver's plain path was deleted; a registrar without the mode may be taking the path"}, "deregistration must pass"},
	{"plain-lost-taken", "settling after our announcement at `<name>-reg.sock` was deleted; a file is there now", modeView{self: selfReg, plainLost: true, plainTaken: true,
		takeBack: "our socket d-reg.sock at the driver's plain path was deleted"}, modeEvent{kind: evSettled}, step{kind: stepYield, yielded: true}, "took the driver's plain socket path"},
	{"plain-lost-free", "settling after our announcement at `<name>-reg.sock` was deleted; the path is still free", modeView{self: selfReg, plainLost: true,
		takeBack: "our socket d-reg.sock at the driver's plain path was deleted"}, modeEvent{kind: evSettled},
		step{kind: stepTakeBack, plainLost: true, takeBack: "our socket d-reg.sock at the driver's plain path was deleted"}, "was deleted"},
	{"yielded", "yielded to a registrar without the mode; another instance leaves", modeView{self: selfReg, yielded: true, peers: peers(oldReg)},
		modeEvent{kind: evPeerGone, other: "old", known: true, st: oldReg}, step{kind: stepNothing, yielded: true}, "holds the driver's plain socket path"},
	{"plain-removed-standing-by", "standing by behind a newer live instance; the driver's `<name>-reg.sock` is unlinked", modeView{self: selfReg, socket: true,
		standingBy: true, peers: peers(young)}, modeEvent{kind: evPlainRemoved, other: "d-reg.sock"}, step{kind: stepNothing, other: "young"}, "already standing by"},
	{"yielded-plain-removed", "yielded; the registrar without the mode unlinks `<name>-reg.sock` in turn", modeView{self: selfReg, yielded: true},
		modeEvent{kind: evPlainRemoved, other: "d-reg.sock"}, step{kind: stepAnnounceAtPlain}, "was removed"},
	{"own-removed", "our announcement socket is deleted by someone else", modeView{self: selfReg},
		modeEvent{kind: evOwnRemoved, other: "d_self_10-reg.sock"}, step{kind: stepRecreate}, "our socket d_self_10-reg.sock was deleted"},
	{"retry-due", "a re-creation is due (the kubelet was silent, or rejected it)", modeView{self: selfReg, socket: true},
		modeEvent{kind: evRetryDue, detail: "kubelet-silent"}, step{kind: stepTakeBack, takeBack: "retry after kubelet-silent"}, "retry after kubelet-silent"},
	{"backoff", "no socket; a re-creation is scheduled", modeView{self: selfReg, retrying: true},
		modeEvent{kind: evPeerGone, other: "old"}, step{kind: stepWait}, "backoff"},
	{"resume", "standing by, serving an unconfirmed announcement; no newer live instance remains", modeView{self: with(selfReg, func(s *InstanceState) { s.Confirmed = false }), socket: true, standingBy: true,
		peers: peers(oldReg)}, modeEvent{kind: evSettled}, step{kind: stepResume}, "newer instance left"},
	{"resume-confirmed", "standing by with a confirmed announcement; the newer instance left, never confirmed, its announcement withdrawn unasked",
		modeView{self: selfReg, socket: true, standingBy: true}, modeEvent{kind: evPeerGone, other: "young", known: true,
			st: with(young, func(s *InstanceState) { s.Confirmed, s.ConfirmedAt, s.Withdrawn = false, 0, 11 })}, step{kind: stepRegistered}, "stands"},
	{"left-for-us", "an older instance left after it checked this one live as confirmed after it (it retired its sockets)", modeView{self: selfReg, socket: true},
		modeEvent{kind: evPeerGone, other: "old", known: true, st: with(oldReg, func(s *InstanceState) { s.Terminating, s.Successor = true, "self" })},
		step{kind: stepNothing}, "stands"},
	{"newer-leaving-unconfirmed", "standing by; a newer instance the kubelet never confirmed says it is terminating", modeView{self: selfReg, socket: true, standingBy: true,
		peers: peers(with(young, func(s *InstanceState) { s.Confirmed, s.ConfirmedAt, s.Terminating = false, 0, true }))},
		modeEvent{kind: evPeerState, other: "young", old: with(young, func(s *InstanceState) { s.Confirmed, s.ConfirmedAt = false, 0 }),
			st: with(young, func(s *InstanceState) { s.Confirmed, s.ConfirmedAt, s.Terminating = false, 0, true })}, step{kind: stepRegistered}, "stands"},
	{"dead-peer", "a found socket never answered (a dead instance)", modeView{self: selfReg, socket: true},
		modeEvent{kind: evPeerGone, other: "old"}, step{kind: stepNothing}, "stands"},
	{"peer-moved", "a peer's stream ended, a later socket of it is watched", modeView{self: selfReg, socket: true, peers: peers(oldReg)},
		modeEvent{kind: evPeerMoved, other: "old"}, step{kind: stepNothing}, "stands"},
	{"failed-no-cycle", "the kubelet failed ours while another instance may hold it", modeView{self: with(selfReg, func(s *InstanceState) { s.Failed = true }),
		peers: peers(oldReg)}, modeEvent{kind: evRetryDue, detail: "rejected"}, step{kind: stepNothing, takeBack: "retry after rejected"}, "no cycle"},
	// The kubelet's verdict.
	{"confirmed", "our latest announcement is confirmed; no newer instance", modeView{self: selfReg, socket: true, peers: peers(oldReg)},
		modeEvent{kind: evConfirmed}, step{kind: stepRegistered, retirePrevious: true}, "confirmed"},
	{"confirmed-older", "our announcement is confirmed, but a newer live instance exists (the kubelet restarted)", modeView{self: selfReg, socket: true,
		peers: peers(young)}, modeEvent{kind: evConfirmed}, step{kind: stepStandBy, other: "young", retirePrevious: true}, "newer instance"},
	{"rejected-validation", "the kubelet's ValidatePlugin rejected our announcement", modeView{self: selfReg, socket: true, peers: peers(oldReg)},
		modeEvent{kind: evRejected, detail: "plugin validation failed", validation: true}, step{kind: stepWithdraw}, "rejected"},
	{"rejected-version", "the kubelet's ValidatePlugin refused the mode's version itself (names 1.<v>.0; not \"a higher version is registered\")", modeView{self: selfReg, socket: true, peers: peers(oldReg)},
		modeEvent{kind: evRejected, detail: "plugin validation failed: None of the versions specified [\"1.10.0\"] are supported", validation: true, versionRefused: true}, step{kind: stepFallBack}, "cannot run the mode"},
	{"failed-others-hold", "RegisterPlugin failed (NodeGetInfo) while another instance may hold it", modeView{self: selfReg, socket: true, peers: peers(oldReg)},
		modeEvent{kind: evRejected, detail: "NodeGetInfo failed"}, step{kind: stepWithdrawNoRetry, failed: true}, "rejected"},
	{"failed-alone", "RegisterPlugin failed, no other instance", modeView{self: selfReg, socket: true},
		modeEvent{kind: evRejected, detail: "NodeGetInfo failed"}, step{kind: stepWithdraw, failed: true}, "rejected"},
	// This instance's driver, while another instance may hold the registration (rolldriver.go).
	{"driver-not-ready-yet", "an older instance holds the registration; this instance's driver has not answered Probe ready yet",
		modeView{self: selfNew, peers: peers(oldReg), driverUnready: true}, modeEvent{kind: evDiscovered}, step{kind: stepWait}, "no claim"},
	{"driver-ready", "an older instance holds the registration; this instance's driver answers Probe ready",
		modeView{self: selfNew, peers: peers(oldReg)}, modeEvent{kind: evDriverReady}, step{kind: stepAnnounce}, "no announcement yet"},
	{"driver-down", "registered after an older instance, which stands by; this instance's driver stops answering Probe", modeView{self: selfDown, socket: true,
		peers: peers(oldReg), driverUnready: true}, modeEvent{kind: evDriverDown}, step{kind: stepNothing}, "published"},
	{"newer-driver-down", "standing by; the newer instance says its driver does not answer Probe", modeView{self: selfReg, socket: true, standingBy: true,
		peers: peers(youngDown)}, modeEvent{kind: evPeerState, other: "young", old: young, st: youngDown},
		step{kind: stepTakeBack, takeBack: "newer instance young's driver does not answer Probe"}, "does not answer"},
	{"driver-down-no-claim", "this instance's driver is down (or ready for less than the stable window); the kubelet confirmed the older instance after this one",
		modeView{self: selfDown, socket: true, peers: peers(oldAfter), driverUnready: true}, modeEvent{kind: evPeerState, other: "old", old: oldReg, st: oldAfter},
		step{kind: stepWait, takeBack: "the kubelet confirmed instance old (older, or leaving) after this one", yield: true}, "no claim"},
	{"driver-stable", "this instance's driver has been ready for the stable window; the older instance was confirmed after this one", modeView{self: selfReg, socket: true,
		peers: peers(oldAfter), takeBack: "the kubelet confirmed instance old (older, or leaving) after this one"}, modeEvent{kind: evDriverStable},
		step{kind: stepTakeBack, takeBack: "instance old was confirmed after this one while this instance's driver was down"}, "while this instance's driver was down"},
	{"driver-stable-holds", "this instance's driver has been ready for the stable window; no instance was confirmed after this one", modeView{self: selfReg, socket: true,
		peers: peers(oldReg)}, modeEvent{kind: evDriverStable}, step{kind: stepNothing}, "stands"},
	{"newer-driver-back", "registered again after the newer instance's driver stopped; the newer one's driver has been ready for the stable window", modeView{self: selfTook,
		socket: true, peers: peers(young)}, modeEvent{kind: evPeerState, other: "young", old: youngDown, st: young}, step{kind: stepStandBy, other: "young"}, "newer instance"},
	// Leaving.
	{"leave-successor", "leaving; an instance confirmed after this one answers the live check", modeView{self: selfLeft, socket: true, holding: true,
		peers: peers(young), successor: "young"}, modeEvent{kind: evLeave}, step{kind: stepRetireAndLeave, other: "young"}, "checked live"},
	{"leave-alone", "leaving, alone on the node (a deleted pod's replacement may be starting)", modeView{self: selfLeft, socket: true, holding: true},
		modeEvent{kind: evLeave}, step{kind: stepWaitSuccessor}, "may yet be confirmed"},
	{"leave-older-holds", "leaving; an older live instance may take the registration", modeView{self: selfLeft, socket: true, holding: true, peers: peers(oldReg)},
		modeEvent{kind: evLeave}, step{kind: stepWaitSuccessor}, "may yet be confirmed"},
	{"leave-starting", "leaving; an instance that has not answered yet (starting)", modeView{self: selfLeft, socket: true, holding: true,
		peers: map[string]peerState{"young": {}}}, modeEvent{kind: evPeerState}, step{kind: stepWaitSuccessor}, "may yet be confirmed"},
	{"leave-confirmed", "leaving; the kubelet confirms our announcement now; an older instance is live", modeView{self: selfLeft, socket: true, holding: true, peers: peers(oldReg)},
		modeEvent{kind: evConfirmed}, step{kind: stepWaitSuccessor}, "may yet be confirmed"},
	{"leave-rejected", "leaving; the kubelet rejects our announcement: never withdrawn nor retried now", modeView{self: selfLeft, socket: true, holding: true, peers: peers(oldReg)},
		modeEvent{kind: evRejected, detail: "NodeGetInfo failed"}, step{kind: stepWaitSuccessor}, "may yet be confirmed"},
	{"leave-nothing-held", "leaving; its unasked announcement withdrawn, no earlier one served", modeView{self: selfLeft, peers: peers(oldReg)},
		modeEvent{kind: evLeave}, step{kind: stepLeave}, "asked no socket"},
	{"leave-wait-over", "leaving; successorWait passed; an older instance is live", modeView{self: selfLeft, socket: true, holding: true, peers: peers(oldReg), waitOver: true},
		modeEvent{kind: evSuccessorWaitOver}, step{kind: stepUnregisterAndLeave}, "no instance was confirmed after this one"},
	{"leave-last", "leaving; successorWait passed, no other instance", modeView{self: selfLeft, socket: true, holding: true, waitOver: true},
		modeEvent{kind: evSuccessorWaitOver}, step{kind: stepUnregisterAndLeave, cleanup: true}, "no instance was confirmed after this one"},
	{"leave-all-ending", "leaving; every other instance is terminating too (the DaemonSet deleted)", modeView{self: selfLeft, socket: true, holding: true,
		peers: peers(with(oldReg, func(s *InstanceState) { s.Terminating = true }))}, modeEvent{kind: evLeave},
		step{kind: stepUnregisterAndLeave, cleanup: true}, "no instance was confirmed after this one"},
}

// TestModeSteps runs nextStep on every row; every step and every event
// appears in some row.
func TestModeSteps(t *testing.T) {
	steps, events, ids := map[stepKind]bool{}, map[modeEventKind]bool{}, map[string]bool{}
	for _, r := range modeRows {
		if ids[r.id] {
			t.Errorf("row id %q is used twice", r.id)
		}
		ids[r.id] = true
		got := nextStep(r.view, r.event)
		steps[got.kind], events[r.event.kind] = true, true
		reason := got.reason
		got.reason = ""
		if !reflect.DeepEqual(got, r.want) {
			t.Errorf("%s: given %s, on %s: got %+v (%s), want %+v", r.id, r.given, r.event.kind, got, reason, r.want)
		}
		if !strings.Contains(reason, r.why) {
			t.Errorf("%s: reason %q does not say %q", r.id, reason, r.why)
		}
	}
	for k := range stepNames {
		if !steps[k] {
			t.Errorf("no row leads to the step %q", k)
		}
	}
	for k := range eventNames {
		if !events[k] {
			t.Errorf("no row has the event %q", k)
		}
	}
}

// nextStep is pure: it never changes the view it is given.
func TestModeStepsLeaveTheViewAlone(t *testing.T) {
	for _, r := range modeRows {
		before := render1(r.view)
		nextStep(r.view, r.event)
		if after := render1(r.view); after != before {
			t.Errorf("%s: nextStep changed the view: %s → %s", r.id, before, after)
		}
	}
}

// render1 prints the view; fmt prints maps sorted by key.
func render1(v modeView) string { return fmt.Sprintf("%+v", v) }

const (
	modeDocBegin = "<!-- mode transitions: generated from registrar/rollmodel_test.go; do not edit -->"
	modeDocEnd   = "<!-- end of mode transitions -->"
)

// TestModeTableInDesignDoc checks that docs/design.md shows the mode's table.
func TestModeTableInDesignDoc(t *testing.T) {
	const docPath = "../docs/design.md"
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	want := modeDocBegin + "\n\n" + renderModeRows() + "\n" + modeDocEnd
	re := regexp.MustCompile("(?s)" + regexp.QuoteMeta(modeDocBegin) + ".*?" + regexp.QuoteMeta(modeDocEnd))
	if !re.Match(doc) {
		t.Fatalf("%s has no block between %q and %q", docPath, modeDocBegin, modeDocEnd)
	}
	if string(re.Find(doc)) == want {
		return
	}
	// The flag is transitions_test.go's (package registrar_test, the same binary).
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(docPath, re.ReplaceAllLiteral(doc, []byte(want)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s does not show the mode's table the tests run; run go test ./registrar -run TestModeTableInDesignDoc -update. Want:\n%s", docPath, want)
}

// renderModeRows is the mode's table as Markdown: the step and the reason
// are nextStep's own answers.
func renderModeRows() string {
	var b strings.Builder
	b.WriteString("| given | event | step | reason | row |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for _, r := range modeRows {
		got := nextStep(r.view, r.event)
		b.WriteString("| " + cell(r.given) + " | " + cell(r.event.kind.String()) + " | " + cell(got.String()) + " | " +
			cell(got.reason) + " | `" + r.id + "` |\n")
	}
	return b.String()
}

// Instances of the driver rows: this one's driver down; the newer one's;
// the older one confirmed after this one; this one after the newer one.
var (
	selfDown  = with(selfReg, func(s *InstanceState) { s.DriverDown = true })
	youngDown = with(young, func(s *InstanceState) { s.DriverDown = true })
	oldAfter  = with(oldReg, func(s *InstanceState) { s.ConfirmedAt = 700 })
	selfTook  = with(selfReg, func(s *InstanceState) { s.ConfirmedAt = 700 })
)
