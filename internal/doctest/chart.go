package doctest

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// The chart README's claims: its values table against values.yaml.

// ValueRow is a row of a chart README's values table: the value's path
// ("image.tag"), the default cell, and where it is.
type ValueRow struct {
	File    string
	Line    int
	Name    string
	Default string
}

func (r ValueRow) String() string { return fmt.Sprintf("%s:%d", r.File, r.Line) }

var valueRow = regexp.MustCompile("^\\| `([A-Za-z][A-Za-z0-9.]*)` \\| ([^|]*) \\|")

// ValueRows returns the rows of the Markdown file at path whose first cell
// is a code span naming a value.
func ValueRows(path string) ([]ValueRow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []ValueRow
	for i, line := range strings.Split(string(data), "\n") {
		if m := valueRow.FindStringSubmatch(line); m != nil {
			out = append(out, ValueRow{File: path, Line: i + 1, Name: m[1], Default: strings.TrimSpace(m[2])})
		}
	}
	return out, nil
}

// CheckValues returns an error for each value of values (a values.yaml as
// decoded into maps) that no row documents, each row that names no value,
// each row of a scalar value whose default cell is not that value as a
// code span, and each row of a map or list whose cell's code spans are not
// its leaves (CheckMapDefault). A row of a map documents the whole map.
func CheckValues(values map[string]any, rows []ValueRow) []error {
	byName := map[string]ValueRow{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	var errs []error
	found := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys {
			p, v := prefix+k, m[k]
			r, ok := byName[p]
			sub, isMap := v.(map[string]any)
			switch {
			case ok:
				found[p] = true
				if want, scalar := scalarSpan(v); scalar && r.Default != want {
					errs = append(errs, fmt.Errorf("%s: %s's default is %s in values.yaml, the README says %s: correct the row", r, p, want, r.Default))
				} else if !scalar {
					if err := CheckMapDefault(r, p, v); err != nil {
						errs = append(errs, err)
					}
				}
			case isMap && len(sub) > 0:
				walk(p+".", sub)
			default:
				errs = append(errs, fmt.Errorf("values.yaml's %s is not in the chart README's values table: add a row with its default and meaning", p))
			}
		}
	}
	walk("", values)
	for _, r := range rows {
		if !found[r.Name] {
			errs = append(errs, fmt.Errorf("%s: %s is no value of values.yaml (a map documented by its own row hides its keys): correct or remove the row", r, r.Name))
		}
	}
	return errs
}

// scalarSpan returns a scalar value as its README code span ("`true`",
// "`\"\"`" for an empty string); false for maps and lists.
func scalarSpan(v any) (string, bool) {
	switch v := v.(type) {
	case map[string]any, []any:
		return "", false
	case string:
		if v == "" {
			return "`\"\"`", true
		}
		return "`" + v + "`", true
	case nil:
		return "`null`", true
	default:
		return fmt.Sprintf("`%v`", v), true
	}
}

// CheckMapDefault returns an error when the default cell of a map's or a
// list's row (name: its value's path) does not state the value: its code
// spans must be the value's leaves as "key: value" (a list item's first key
// as "- key: value"; "{}" and "[]" for an empty one), each once, and the
// keys on the way to them ("requests", "limits") must be words of the cell.
func CheckMapDefault(r ValueRow, name string, v any) error {
	var want, keys []string
	var walk func(v any, item bool)
	walk = func(v any, item bool) {
		switch v := v.(type) {
		case map[string]any:
			if len(v) == 0 {
				want = append(want, "{}")
			}
			ks := slices.Sorted(maps.Keys(v))
			for i, k := range ks {
				prefix := ""
				if item && i == 0 {
					prefix = "- "
				}
				if s, scalar := scalarSpan(v[k]); scalar {
					want = append(want, prefix+k+": "+strings.Trim(s, "`"))
				} else {
					keys = append(keys, k)
					walk(v[k], false)
				}
			}
		case []any:
			if len(v) == 0 {
				want = append(want, "[]")
			}
			for _, e := range v {
				walk(e, true)
			}
		}
	}
	walk(v, false)
	var got []string
	for _, m := range spanText.FindAllStringSubmatch(r.Default, -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	var missing []string
	words := strings.FieldsFunc(spanText.ReplaceAllString(r.Default, ""), func(c rune) bool { return c == ' ' || c == ',' || c == ';' })
	for _, k := range keys {
		if !slices.Contains(words, k) {
			missing = append(missing, k)
		}
	}
	if slices.Equal(got, want) && len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s's default in values.yaml is `%s`%s, the README says %s: correct the row (each leaf as a code span, under the words of its keys)",
		r, name, strings.Join(want, "`, `"), keyNote(keys), r.Default)
}

func keyNote(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return " under " + strings.Join(keys, ", ")
}
