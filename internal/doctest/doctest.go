// Package doctest checks the project's Markdown as a reader would use it:
// every shell code block says whether it is run by the tests, needs a node
// (run by CI), or is an example to adapt; the blocks tagged to run are run;
// and every link resolves (files and anchors in the tree; external links by
// their form only, without the network).
//
// A block's tag is the word after its language in the fence's info string:
// "```sh test", "```sh ci" or "```sh illustrative". GitHub uses only the
// first word (the language) to render the block, so the tag is not shown.
package doctest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Tag says how a code block is checked.
type Tag string

const (
	// Test blocks are run by make test (bash -euo pipefail) and must exit 0.
	Test Tag = "test"
	// CI blocks are run by CI (.ci/run), not by make test: they need a node
	// (root, the local node or kind), or they are make test itself. Each of
	// their commands must be a step of .ci/run (CheckCI).
	CI Tag = "ci"
	// Illustrative blocks are examples to adapt and are never run.
	Illustrative Tag = "illustrative"
)

// shellLangs are the languages whose blocks must carry a tag.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Block is one fenced code block of a Markdown file.
type Block struct {
	File string // the file's path as given to Blocks
	Line int    // line of the opening fence, 1-based
	Lang string // first word of the info string ("" when there is none)
	Tag  Tag    // second word of the info string ("" when there is none)
	Text string // the block's lines, the fence's indentation removed, each ending in "\n"
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Shell reports whether the block holds shell commands (or a shell session).
func (b Block) Shell() bool { return shellLangs[b.Lang] }

// Check returns what is wrong with the block's tag, or nil: a block needs a
// language, and a shell block one of the three tags; a tag is only valid on a
// shell block.
func (b Block) Check() error {
	switch {
	case b.Lang == "":
		return fmt.Errorf("%s: a code block without a language: name it (```text for output, ```sh test|ci|illustrative for commands; docs/README.md)", b)
	case !b.Shell() && b.Tag != "":
		return fmt.Errorf("%s: tag %q on a ```%s block: only shell blocks (sh, bash, shell, console) are tagged", b, b.Tag, b.Lang)
	case !b.Shell():
		return nil
	}
	switch b.Tag {
	case Test:
		if b.Lang == "console" {
			return fmt.Errorf("%s: a ```console block (commands and their output) cannot be run: write the commands in a ```sh test block", b)
		}
		return nil
	case CI, Illustrative:
		return nil
	case "":
		if b.Lang == "console" {
			return fmt.Errorf("%s: untagged ```console block: write ```console ci (CI runs its commands) or ```console illustrative (docs/README.md)", b)
		}
		return fmt.Errorf("%s: untagged ```%s block: write ```%s test (make test runs it), ```%s ci (CI runs it: needs a node) or ```%s illustrative (docs/README.md)", b, b.Lang, b.Lang, b.Lang, b.Lang)
	default:
		return fmt.Errorf("%s: unknown tag %q after ```%s: use test, ci or illustrative (docs/README.md)", b, b.Tag, b.Lang)
	}
}

// fence is an opening or closing code fence: its indentation, character and length.
type fence struct {
	indent int
	char   byte
	n      int
	info   string
}

// parseFence reports whether line is a code fence (``` or ~~~, at any
// indentation, so that fences in list items count) and returns it.
func parseFence(line string) (fence, bool) {
	rest := strings.TrimLeft(line, " \t")
	f := fence{indent: len(line) - len(rest)}
	if len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return f, false
	}
	f.char = rest[0]
	for f.n < len(rest) && rest[f.n] == f.char {
		f.n++
	}
	if f.n < 3 {
		return f, false
	}
	f.info = strings.TrimSpace(rest[f.n:])
	if f.char == '`' && strings.Contains(f.info, "`") {
		return f, false // an inline code span, not a fence (CommonMark)
	}
	return f, true
}

// Blocks returns the fenced code blocks of the Markdown file at path.
func Blocks(path string) ([]Block, error) {
	blocks, _, err := parseFile(path)
	return blocks, err
}

// Prose returns the lines of the Markdown file at path outside its fenced
// code blocks: line i+1 of the file is element i, a block's lines blank.
func Prose(path string) ([]string, error) {
	_, prose, err := parseFile(path)
	return prose, err
}

// parseFile reads the Markdown file at path and splits it as parse does.
func parseFile(path string) (blocks []Block, prose []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return parse(path, data)
}

// eachCommand calls f with each command a Markdown file names and the line
// that names it: the text of every code span of its prose, then every
// command of its shell blocks (at the block's line).
func eachCommand(blocks []Block, prose []string, f func(line int, cmd string)) {
	for i, line := range prose {
		for _, m := range spanText.FindAllStringSubmatch(line, -1) {
			f(i+1, m[1])
		}
	}
	for _, b := range blocks {
		if !b.Shell() {
			continue
		}
		for _, c := range b.Commands() {
			f(b.Line, c)
		}
	}
}

// parse splits a Markdown file into its fenced code blocks and its other
// lines (the prose, with the blocks' lines blanked so line numbers stay).
func parse(path string, data []byte) (blocks []Block, prose []string, err error) {
	var (
		open  *fence
		cur   Block
		text  strings.Builder
		lineN int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		lineN++
		line := sc.Text()
		f, isFence := parseFence(line)
		switch {
		case open == nil && isFence:
			open = &f
			words := strings.Fields(f.info)
			cur = Block{File: path, Line: lineN}
			if len(words) > 0 {
				cur.Lang = words[0]
			}
			if len(words) > 1 {
				cur.Tag = Tag(words[1])
			}
			text.Reset()
			prose = append(prose, "")
		case open == nil:
			prose = append(prose, line)
		case isFence && f.char == open.char && f.n >= open.n && f.info == "":
			cur.Text = text.String()
			blocks = append(blocks, cur)
			open = nil
			prose = append(prose, "")
		default:
			// Remove the fence's indentation, as CommonMark does.
			strip := 0
			for strip < open.indent && strip < len(line) && (line[strip] == ' ' || line[strip] == '\t') {
				strip++
			}
			text.WriteString(line[strip:])
			text.WriteByte('\n')
			prose = append(prose, "")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if open != nil {
		return nil, nil, fmt.Errorf("%s:%d: code block never closed", path, cur.Line)
	}
	return blocks, prose, nil
}

// Run runs a block's commands as bash -euo pipefail in dir with env (nil:
// this process's environment) and returns their combined output. An error
// means a command failed: the block does not work as written. The commands
// run in a process group of their own, which is killed when they end or ctx
// is done, so that a background process a block started does not outlive it.
func Run(ctx context.Context, b Block, dir string, env []string) ([]byte, error) {
	// The output goes to a file, not a pipe: a background process that
	// inherited it must not keep Wait waiting after bash ended.
	f, err := os.CreateTemp("", "doctest-out")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.Text)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err = cmd.Start(); err == nil {
		err = cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the block left running; ESRCH when nothing
	}
	out, rerr := os.ReadFile(f.Name())
	if rerr != nil {
		return nil, rerr
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("%s: the block's commands did not end: %w", b, ctx.Err())
	}
	if err != nil {
		return out, fmt.Errorf("%s: the block's commands failed: %w", b, err)
	}
	return out, nil
}

// CISteps returns the commands of the CI script at path: the words after the
// step name of each `run "name" cmd...` line, make's --no-print-directory
// dropped ("make demo KIND=1").
func CISteps(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	steps := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, `run "`) {
			continue
		}
		_, rest, ok := strings.Cut(line[len(`run "`):], `"`)
		if !ok {
			continue
		}
		var words []string
		for _, w := range strings.Fields(rest) {
			if w != "--no-print-directory" {
				words = append(words, w)
			}
		}
		steps[strings.Join(words, " ")] = true
	}
	return steps, nil
}

// Commands returns a shell block's commands, one a line, comments and blank
// lines dropped, "$ " prompts removed from a console block (and its output
// lines dropped).
func (b Block) Commands() []string {
	var cmds []string
	for _, line := range strings.Split(b.Text, "\n") {
		if b.Lang == "console" {
			var ok bool
			if line, ok = strings.CutPrefix(line, "$ "); !ok {
				continue
			}
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// CheckCI returns what is wrong with a ```sh ci block, or nil: each of its
// commands must be a step of the CI script (steps, from CISteps), so that
// "CI runs it" stays true.
func (b Block) CheckCI(steps map[string]bool) error {
	for _, c := range b.Commands() {
		if !steps[c] {
			return fmt.Errorf("%s: ```%s ci, but CI (.ci/run) has no step %q: add it to .ci/run, or tag the block illustrative", b, b.Lang, c)
		}
	}
	return nil
}
