// Package platformtest is for tests that run on every platform of a
// release, natively or under a user-mode emulator (`make test-platforms`:
// kind/platforms.sh runs test binaries built with GOARCH=arm, arm64, ppc64le
// and s390x under qemu-user). Report proves which platform a test binary
// runs as; SelfCommand re-executes the test binary on that same platform,
// where exec.Command(os.Args[0]) would fail with "exec format error" (no
// binfmt registration) or run outside the emulator's control.
package platformtest

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	// EnvGOARCH names the GOARCH a test binary must run as; Report fails
	// the test when it runs as another. Set by kind/platforms.sh.
	EnvGOARCH = "CSI_REGISTRAR_TEST_GOARCH"
	// EnvExec names the program that runs a binary of this platform on
	// this machine: the user-mode emulator, e.g. /usr/bin/qemu-arm, under
	// kind/platforms.sh; unset or empty: the binary runs by itself.
	EnvExec = "CSI_REGISTRAR_TEST_EXEC"
)

// ELFHeader is what the ELF header of a Go binary says of its platform:
// machine, class (32 or 64 bits) and byte order.
type ELFHeader struct {
	Machine elf.Machine
	Class   elf.Class
	Data    elf.Data
}

// ELFOf returns the ELF header of a Go binary for goarch, one of a
// release's GOARCHes (s390x is big-endian, arm 32-bit); ok is false for
// any other.
func ELFOf(goarch string) (h ELFHeader, ok bool) {
	switch goarch {
	case "amd64":
		return ELFHeader{elf.EM_X86_64, elf.ELFCLASS64, elf.ELFDATA2LSB}, true
	case "arm":
		return ELFHeader{elf.EM_ARM, elf.ELFCLASS32, elf.ELFDATA2LSB}, true
	case "arm64":
		return ELFHeader{elf.EM_AARCH64, elf.ELFCLASS64, elf.ELFDATA2LSB}, true
	case "ppc64le":
		return ELFHeader{elf.EM_PPC64, elf.ELFCLASS64, elf.ELFDATA2LSB}, true
	case "s390x":
		return ELFHeader{elf.EM_S390, elf.ELFCLASS64, elf.ELFDATA2MSB}, true
	}
	return ELFHeader{}, false
}

// Report checks that the test binary runs as the platform it was built
// for, and as $EnvGOARCH when that is set: runtime.GOARCH, the ELF header
// of the running executable (its machine, class and byte order) and the
// size of int agree. It then writes one line to out (os.Stdout when nil),
// which kind/platforms.sh looks for:
//
//	platformtest: <test binary> GOOS=linux GOARCH=arm GOARM=7 int=32 elf=EM_ARM/ELFCLASS32/ELFDATA2LSB uname=armv7l
//
// uname is the machine the kernel (or the emulator, which answers uname
// itself) says the process runs on.
func Report(t testing.TB, out io.Writer) {
	t.Helper()
	if want := os.Getenv(EnvGOARCH); want != "" && want != runtime.GOARCH {
		t.Fatalf("this test binary runs as GOARCH=%s, but %s=%s: it was built for another platform", runtime.GOARCH, EnvGOARCH, want)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("the test binary's path: %v", err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatalf("the test binary %s: %v", exe, err)
	}
	defer f.Close()
	want, known := ELFOf(runtime.GOARCH)
	if known && (f.Machine != want.Machine || f.Class != want.Class || f.Data != want.Data) {
		t.Errorf("%s: ELF %v %v %v, but it runs as GOARCH=%s (want %v %v %v)", exe, f.Machine, f.Class, f.Data, runtime.GOARCH, want.Machine, want.Class, want.Data)
	}
	if bits := map[elf.Class]int{elf.ELFCLASS32: 32, elf.ELFCLASS64: 64}[f.Class]; bits != strconv.IntSize {
		t.Errorf("%s: an %v binary, but int has %d bits", exe, f.Class, strconv.IntSize)
	}
	var u unix.Utsname
	machine := "?"
	if err := unix.Uname(&u); err == nil {
		machine = unix.ByteSliceToString(u.Machine[:])
	}
	name, goarm := exe, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		name = bi.Path
		for _, s := range bi.Settings {
			if s.Key == "GOARM" {
				goarm = " GOARM=" + s.Value
			}
		}
	}
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintf(out, "platformtest: %s GOOS=%s GOARCH=%s%s int=%d elf=%v/%v/%v uname=%s\n",
		name, runtime.GOOS, runtime.GOARCH, goarm, strconv.IntSize, f.Machine, f.Class, f.Data, machine)
	if !known {
		t.Logf("GOARCH=%s is no platform of a release: its ELF header was not compared", runtime.GOARCH)
	}
}

// SelfCommand is the command that runs the test binary again with args, on
// this process's platform: through $EnvExec when set (the emulator), else
// os.Args[0] itself.
func SelfCommand(args ...string) *exec.Cmd {
	if emu := os.Getenv(EnvExec); emu != "" {
		return exec.Command(emu, append([]string{os.Args[0]}, args...)...)
	}
	return exec.Command(os.Args[0], args...)
}

// SkipUnderEmulation skips t when the test binary runs under the user-mode
// emulator ($EnvExec set), saying why. For tests of behaviour the emulator
// fakes rather than runs, e.g. /proc/<own pid>/stat, which qemu-user writes
// itself, with the start time of the calling thread instead of the process.
func SkipUnderEmulation(t testing.TB, why string) {
	t.Helper()
	if emu := os.Getenv(EnvExec); emu != "" {
		t.Skipf("under %s: %s", emu, why)
	}
}
