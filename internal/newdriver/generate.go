package newdriver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Result says what Generate wrote.
type Result struct {
	Dir     string   // the project's directory, absolute
	Files   []string // the files written, slash-separated, sorted
	Package string   // the driver's Go package name
	Binary  string   // the command's name
}

// Generate writes the project o describes. Every input is checked, and every
// file rendered, before the first one is written: a bad input leaves nothing
// behind. Errors about the input are *csiplugin.ValidationError. With tidy,
// `go mod tidy` completes go.mod and go.sum at the end (through the module
// proxy for what the source's go.sum does not hold).
func Generate(ctx context.Context, o Options, tidy bool) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	files, err := o.files()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := validateDir(dir); err != nil { // again, just before writing
		return nil, err
	}
	res := &Result{Dir: dir, Package: o.packageName(), Binary: o.Binary()}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, f.path)
	}
	slices.Sort(res.Files)
	if tidy {
		if err := goModTidy(ctx, dir); err != nil {
			return res, err
		}
	}
	return res, nil
}

// files returns every file of the project, in memory.
func (o Options) files() ([]file, error) {
	src, err := readSource(o.Source)
	if err != nil {
		return nil, err
	}
	rendered, err := o.render()
	if err != nil {
		return nil, err
	}
	// The main package's files are Go written against stubdriver: renamed
	// with the driver's, and checked for names that would collide with them.
	var goFiles, other []file
	for _, f := range rendered {
		if strings.HasSuffix(f.path, ".go") {
			goFiles = append(goFiles, f)
		} else {
			other = append(other, f)
		}
	}
	if err := o.checkPackageName(append(slices.Clone(src.driver), goFiles...)); err != nil {
		return nil, err
	}
	renamed, err := o.renameDriver(src.driver, goFiles)
	if err != nil {
		return nil, err
	}
	storage, err := o.storageDefinition(src.storage)
	if err != nil {
		return nil, err
	}
	// manifests/base/ is csi-registrar's, edited as baseedits.go declares.
	base, err := transformBase(src.base, baseEdits(), baseForbidden(), o.templateData(), o.baseHeader)
	if err != nil {
		return nil, err
	}
	files := append(append(renamed, other...), base...)
	if o.Source.checkout() {
		copied, err := o.thirdParty(renamed, src.license)
		if err != nil {
			return nil, err
		}
		files = append(files, copied...)
	}
	files = append(files, storage,
		file{path: "go.mod", data: o.goMod(src.goVersion), mode: 0o644},
		file{path: "go.sum", data: src.goSum, mode: 0o644},
		file{path: "LICENSE", data: src.license, mode: 0o644},
	)
	return files, nil
}

// goMod is the project's go.mod before go mod tidy: the module, the Go
// version of csi-registrar, and csi-registrar itself (replaced by the copy
// in thirdPartyDir until a release exists: a relative path, so that the
// project builds wherever it is). go mod tidy adds the rest at the versions
// csi-registrar requires.
func (o Options) goMod(goVersion string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\nrequire %s %s\n", o.Module, goVersion, ModulePath, o.Source.requiredVersion())
	if o.Source.checkout() {
		fmt.Fprintf(&b, "\n// Until csi-registrar is tagged: the copy of its packages this project imports\n"+
			"// (README.md, \"Moving to a release of csi-registrar\"; make use-checkout points\n"+
			"// it at a checkout).\nreplace %s => ./%s\n", ModulePath, thirdPartyDir)
	}
	return b.Bytes()
}

// goModTidy runs go mod tidy in dir, outside any go.work.
func goModTidy(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w\n%s\nthe files are written; run go mod tidy there once the cause is fixed", dir, err, out)
	}
	return nil
}
