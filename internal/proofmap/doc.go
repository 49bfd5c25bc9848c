// Package proofmap keeps the proofs of .ci/run from getting lost: the proof
// map of docs/development.md ("The proof map") names each proof by identity —
// a Go test of kind/e2e (build tag e2e) or of the nested module
// kind/pluginmanager, a case of kubectl csi-registrar verify
// (internal/drivercases), or an e2e* make target — and the .ci/run step that
// runs it, or "not in CI: <where it runs and why>".
//
// Check compares the map with what exists (the test functions in the Go
// source, the verify cases, the documented e2e* targets) and with what each
// step selects (its -test.run / -test.skip, PM_RUN, --case, the target).
// Verdicts reads what a .ci/run run wrote (each step's output, its exit code
// and the go test -json of the test steps) and gives each mapped proof of the
// run PASS, FAIL or MISSING; cmd/proofcheck prints them and fails on any but
// PASS. Nothing here builds or runs a test: the Go source is read.
package proofmap
