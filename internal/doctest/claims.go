package doctest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The documentation's claims about the code that are checked against it:
// the defaults it states for csi-registrar's flags (against each command's
// --help) and the make targets it names (against `make help`).

// FlagHelp is what a command's --help says of one flag.
type FlagHelp struct {
	Default    string // "" when --help shows none
	HasDefault bool
	Required   bool
}

// helpFlag is a flag line of urfave/cli's help: "   --name value   usage (default: X) [$ENV]".
var (
	helpFlag    = regexp.MustCompile(`^\s+(--?[a-z][a-z0-9-]*)(?:, -[a-z])?\s`)
	helpDefault = regexp.MustCompile(`\(default:? ([^)]*)\)`)
)

// ParseHelp returns the flags of a command's --help output (urfave/cli's
// format) by name, without dashes.
func ParseHelp(help string) map[string]FlagHelp {
	flags := map[string]FlagHelp{}
	for _, line := range strings.Split(help, "\n") {
		m := helpFlag.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var f FlagHelp
		if d := helpDefault.FindStringSubmatch(line); d != nil {
			f.HasDefault = true
			// "(default $KUBE_NODE_NAME, else the host name)": the value is the first part.
			v, _, _ := strings.Cut(d[1], ", ")
			f.Default = strings.Trim(v, `"`)
		}
		f.Required = strings.Contains(line, "(required)")
		flags[strings.TrimLeft(m[1], "-")] = f
	}
	return flags
}

// FlagClaim is a default the documentation states for a flag, or (a flag
// table's row with an empty default cell) that the flag exists.
type FlagClaim struct {
	File     string
	Line     int
	Command  string   // the csi-registrar command the text is about ("" when it does not say)
	Flag     string   // without dashes
	Values   []string // the default, or (a row of several flags) the defaults among them
	Required bool     // "required" instead of a default
	// Prose: stated in a sentence, where the command named last may not be
	// the one meant; checked against the first command that has the flag,
	// that one first.
	Prose bool
}

func (c FlagClaim) String() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

var (
	// A command the text is about: "`csi-registrar driver`", "## `csi-registrar register`",
	// "`kubectl csi-registrar status`" (the kubectl plugin's commands: status, verify, storage-e2e).
	commandRef = regexp.MustCompile("`(?:/?csi-registrar |kubectl csi-registrar )(register|driver|doctor|status|verify|storage-e2e)\\b")
	spanText   = regexp.MustCompile("`([^`]+)`")
	// "`--flag` (default `X`", "`--flag` default `X`", "`--flag=X`, the default", "`--flag` (5 min by default)".
	proseDefault = []*regexp.Regexp{
		regexp.MustCompile("`(--?[a-z][a-z0-9-]*)(?:[= ][^`]*)?` \\(?default:? `([^`]*)`"),
		regexp.MustCompile("`(--?[a-z][a-z0-9-]*)=([^`]*)`, the default"),
		regexp.MustCompile("`(--?[a-z][a-z0-9-]*)` \\(([0-9.]+ ?[a-z]*) by default\\)"),
		// "`--flag`, `X` by default"
		regexp.MustCompile("`(--?[a-z][a-z0-9-]*)`, `([^`]*)` by default"),
		// "`--proxy-timeout` (5s) bounds ...": a value alone in parentheses, starting with a digit.
		regexp.MustCompile("`(--?[a-z][a-z0-9-]*)` \\(([0-9][0-9a-z.]*)\\)"),
	}
)

// FlagClaims returns the flag defaults the Markdown file at path states: in
// tables with a "flag" and a "default" column (the flags and the defaults
// are the cells' code spans; an empty cell states nothing), and in prose as
// "`--flag` (default `X`)", "`--flag=X`, the default", "`--flag` (X by
// default)", "`--flag`, `X` by default" or "`--flag` (5s)" (a claim may go on
// over a line break). Each is attributed to the last command the text named
// before it.
func FlagClaims(path string) ([]FlagClaim, error) {
	prose, err := Prose(path)
	if err != nil {
		return nil, err
	}
	var (
		claims         []FlagClaim
		command        string
		flagCol, dfCol = -1, -1 // the current table's columns, -1 outside one
	)
	for i, line := range prose {
		n := i + 1
		isRow := strings.HasPrefix(strings.TrimSpace(line), "|")
		if !isRow {
			flagCol, dfCol = -1, -1
		}
		if flagCol < 0 { // prose, or a row of a table without flag and default columns
			// The line and the next one: a claim that starts on this line may end on the next.
			text := line
			if i+1 < len(prose) {
				text += " " + strings.TrimSpace(prose[i+1])
			}
			for _, re := range proseDefault {
				for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
					if m[0] >= len(line) {
						continue
					}
					cmd := command
					if r := commandRef.FindAllStringSubmatch(line[:m[0]], -1); r != nil {
						cmd = r[len(r)-1][1]
					}
					claims = append(claims, FlagClaim{File: path, Line: n, Command: cmd, Flag: strings.TrimLeft(text[m[2]:m[3]], "-"), Values: []string{text[m[4]:m[5]]}, Prose: true})
				}
			}
			if m := commandRef.FindAllStringSubmatch(line, -1); m != nil {
				command = m[len(m)-1][1]
			}
			if !isRow {
				continue
			}
		}
		cells := tableCells(line)
		switch {
		case flagCol < 0: // a header, or a table of no interest
			for j, c := range cells {
				switch strings.ToLower(c) {
				case "flag":
					flagCol = j
				case "default":
					dfCol = j
				}
			}
			if flagCol < 0 || dfCol < 0 {
				flagCol, dfCol = -1, -1
			}
		case strings.Trim(line, "|-: \t") == "": // the header's underline
		case max(flagCol, dfCol) < len(cells):
			df := cells[dfCol]
			var values []string
			for _, m := range spanText.FindAllStringSubmatch(df, -1) {
				values = append(values, m[1])
			}
			for _, m := range spanText.FindAllStringSubmatch(cells[flagCol], -1) {
				if !strings.HasPrefix(m[1], "-") {
					continue
				}
				name, _, _ := strings.Cut(m[1], " ")
				name, _, _ = strings.Cut(name, "=")
				c := FlagClaim{File: path, Line: n, Command: command, Flag: strings.TrimLeft(name, "-"), Values: values}
				if strings.EqualFold(df, "required") {
					c.Required, c.Values = true, nil
				}
				// An empty default cell claims only that the flag exists.
				claims = append(claims, c)
			}
		}
	}
	return claims, nil
}

// tableCells splits a Markdown table row into its cells, trimmed.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// Check returns what is wrong with the claim, or nil: the flag must be one
// of its command's (helps: each command's ParseHelp; a claim without a
// command is checked against the first command that has the flag, in
// register, driver, doctor order), and the default --help shows must be
// the one stated, or one of those stated (a row of several flags).
func (c FlagClaim) Check(helps map[string]map[string]FlagHelp) error {
	cmds := []string{c.Command}
	if c.Command == "" {
		cmds = []string{"register", "driver", "doctor"}
	}
	if c.Prose {
		for _, cmd := range append([]string{"register", "driver", "doctor"}, kubectlCommands...) {
			if !slices.Contains(cmds, cmd) {
				cmds = append(cmds, cmd)
			}
		}
	}
	for _, cmd := range cmds {
		f, ok := helps[cmd][c.Flag]
		if !ok {
			continue
		}
		if !c.Required && len(c.Values) == 0 {
			return nil
		}
		if c.Required {
			if !f.Required {
				return fmt.Errorf("%s: --%s is documented as required, but `%s --help` does not say so (default %q)", c, c.Flag, commandLine(cmd), f.Default)
			}
			return nil
		}
		for _, v := range c.Values {
			if sameDefault(v, f) {
				return nil
			}
		}
		shown := "no default"
		if f.HasDefault {
			shown = fmt.Sprintf("default %q", f.Default)
		}
		return fmt.Errorf("%s: the documentation states the default of --%s as %q, but `%s --help` shows %s: correct the documentation (or the flag)",
			c, c.Flag, strings.Join(c.Values, `", "`), commandLine(cmd), shown)
	}
	if c.Command == "" {
		return fmt.Errorf("%s: --%s, in the documentation's flag table, is a flag of no csi-registrar command: correct or remove it", c, c.Flag)
	}
	return fmt.Errorf("%s: --%s, in the documentation, is not a flag of `%s`: correct or remove it", c, c.Flag, commandLine(c.Command))
}

// kubectlCommands are the kubectl plugin's commands (the rest are csi-registrar's).
var kubectlCommands = []string{"status", "verify", "storage-e2e"}

// commandLine returns how a command is typed: "csi-registrar driver", "kubectl csi-registrar status".
func commandLine(cmd string) string {
	if slices.Contains(kubectlCommands, cmd) {
		return "kubectl csi-registrar " + cmd
	}
	return "csi-registrar " + cmd
}

// sameDefault reports whether a stated default v is what --help shows:
// the same text, or the same duration ("2m" and "2m0s", "5 min" and "5m0s");
// a zero value ("0", "false") when --help shows none (it omits zero values).
func sameDefault(v string, f FlagHelp) bool {
	v = strings.TrimSpace(v)
	if !f.HasDefault {
		return v == "0" || v == "false"
	}
	if v == f.Default {
		return true
	}
	dv, err1 := parseDuration(v)
	df, err2 := parseDuration(f.Default)
	return err1 == nil && err2 == nil && dv == df
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.ReplaceAll(strings.ReplaceAll(s, " min", "m"), " ", "")
	if s == "0" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// MakeClaim is a `make TARGET` the documentation names.
type MakeClaim struct {
	File   string
	Line   int
	Target string
}

func (c MakeClaim) String() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

var targetName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// makeTargets returns the targets of the make commands in a command line:
// after each word "make", its options and VAR=value assignments skipped,
// the first word that is a target's name ("make local-*" names none). A
// make command with -C or -f runs another Makefile (e.g. a generated
// project's): its target is not this repository's, and is left out.
func makeTargets(cmd string) []string {
	var targets []string
	words := strings.Fields(cmd)
	for i := 0; i < len(words); i++ {
		if words[i] != "make" {
			continue
		}
		other := false
		for j := i + 1; j < len(words); j++ {
			w := strings.TrimRight(words[j], ",.:;)`'\"")
			if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
				if w == "-C" || w == "-f" {
					other = true
					j++
				}
				continue
			}
			if targetName.MatchString(w) && !other {
				targets = append(targets, w)
			}
			i = j
			break
		}
	}
	return targets
}

// MakeClaims returns the make targets the Markdown file at path names: in
// its code spans ("`make e2e K8S=1.34`") and the commands of its shell blocks.
func MakeClaims(path string) ([]MakeClaim, error) {
	blocks, prose, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	var claims []MakeClaim
	eachCommand(blocks, prose, func(line int, cmd string) {
		for _, t := range makeTargets(cmd) {
			claims = append(claims, MakeClaim{File: path, Line: line, Target: t})
		}
	})
	return claims, nil
}

// HelpTargets returns the targets `make help` lists (the first word of each line).
func HelpTargets(help string) map[string]bool {
	targets := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			targets[f[0]] = true
		}
	}
	return targets
}

// Check returns an error when `make help` (targets, from HelpTargets) does
// not list the target.
func (c MakeClaim) Check(targets map[string]bool) error {
	if targets[c.Target] {
		return nil
	}
	known := slices.Sorted(maps.Keys(targets))
	return fmt.Errorf("%s: `make %s`, but `make help` lists no target %s (it lists: %s)", c, c.Target, c.Target, strings.Join(known, " "))
}

// Undocumented returns the flags of help (a command's --help, parsed) that
// no claim names, sorted; --help itself is left out.
func Undocumented(help map[string]FlagHelp, claims []FlagClaim) []string {
	var out []string
	for name := range help {
		if name == "help" || slices.ContainsFunc(claims, func(c FlagClaim) bool { return c.Flag == name }) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// cobraFlag is a flag line of cobra's help: "  -f, --filename stringArray   usage (default "x")".
var (
	cobraFlag    = regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?--([a-z][a-z0-9-]*)(?: [a-zA-Z]+)?\s{2,}(.*)$`)
	cobraDefault = regexp.MustCompile(`\(default "?([^")]*)"?\)$`)
)

// ParseCobraHelp returns the flags of a cobra command's --help output (the
// kubectl plugin's commands) by name, without dashes.
func ParseCobraHelp(help string) map[string]FlagHelp {
	flags := map[string]FlagHelp{}
	for _, line := range strings.Split(help, "\n") {
		m := cobraFlag.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var f FlagHelp
		if d := cobraDefault.FindStringSubmatch(strings.TrimSpace(m[2])); d != nil {
			f.HasDefault, f.Default = true, d[1]
		}
		flags[m[1]] = f
	}
	return flags
}

// kubectlCommand is a kubectl plugin command line: "kubectl csi-registrar verify -f DIR --case R5_x".
var kubectlCommand = regexp.MustCompile(`\bkubectl csi-registrar (status|verify|storage-e2e)\b([^|;&` + "`" + `]*)`)

// KubectlFlagClaims returns the flags the Markdown file at path gives the
// kubectl plugin's commands, in its code spans and the commands of its
// shell blocks ("`kubectl csi-registrar status --kubelet-state`"): each a
// claim that the command has the flag.
func KubectlFlagClaims(path string) ([]FlagClaim, error) {
	blocks, prose, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	var claims []FlagClaim
	eachCommand(blocks, prose, func(line int, cmd string) {
		for _, m := range kubectlCommand.FindAllStringSubmatch(cmd, -1) {
			for _, w := range strings.Fields(m[2]) {
				if !strings.HasPrefix(w, "--") || w == "--" {
					continue
				}
				name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
				name = strings.TrimRight(name, ",.:;)'\"")
				claims = append(claims, FlagClaim{File: path, Line: line, Command: m[1], Flag: name})
			}
		}
	})
	return claims, nil
}
