package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/stubdriver"
	"github.com/urfave/cli/v2"
)

// badFlag is the error for a flag value that breaks a rule.
func badFlag(name, value, rule, fix string) error {
	return &csiplugin.ValidationError{What: "--" + name, Value: value, Rule: rule, Fix: fix}
}

// notEmpty refuses a flag that has a default but was given an empty value
// (e.g. --csi-address= or an empty CSI_REGISTRAR_CSI_ADDRESS): the library
// would quietly use its default instead of what the user meant.
func notEmpty(c *cli.Context, names ...string) error {
	for _, name := range names {
		if c.IsSet(name) && c.String(name) == "" {
			return badFlag(name, "", "must not be empty", "omit it to use the default")
		}
	}
	return nil
}

// optionFlags names the flag that sets each library option (registrar and
// stubdriver Options fields, as their *registrar.OptionError reports them).
var optionFlags = map[registrar.Option]string{
	registrar.OptionCSIAddress:              "csi-address",
	registrar.OptionKubeletRegistrationPath: "kubelet-registration-path",
	registrar.OptionPluginRegistrationPath:  "plugin-registration-path",
	registrar.OptionDriverName:              "driver-name",
	registrar.OptionTimeout:                 "timeout",
	registrar.OptionConnectionTimeout:       "connection-timeout",
	registrar.OptionKubeletWait:             "kubelet-wait",
	registrar.OptionRegistrationRetryMax:    "registration-retry-max",
	registrar.OptionRollingUpdate:           "rolling-update",
	registrar.OptionHTTPEndpoint:            "http-endpoint",
	registrar.OptionStateFile:               "state-file",
	stubdriver.OptionEndpoint:               "endpoint",
	stubdriver.OptionShutdownDelay:          "shutdown-delay",
	stubdriver.OptionMaxVolumesPerNode:      "max-volumes-per-node",
	stubdriver.OptionStateDir:               "state-dir",
	stubdriver.OptionKubeletPodsDir:         "kubelet-pods-dir",
}

// message is err's text for the command line: an option of a library is
// called by the flag that sets it.
func message(err error) string {
	var oe *registrar.OptionError
	if errors.As(err, &oe) {
		if flag, ok := optionFlags[oe.Option]; ok {
			return oe.Describe("--" + flag)
		}
	}
	return err.Error()
}

// explainParseError rewrites an error of the flag parser (Go's flag package,
// under urfave/cli) into a usageError that names the value, the rule and the
// fix, as every other error of bad input does (a *csiplugin.ValidationError,
// exit code 2). flags are the flags of the
// command that was parsed; cmd is its name, e.g. "csi-registrar register".
// Errors it does not recognise are returned as they are.
func explainParseError(err error, cmd string, flags []cli.Flag) error {
	msg := err.Error()
	lookup := func(name string) cli.Flag {
		for _, f := range flags {
			for _, n := range f.Names() {
				if n == name {
					return f
				}
			}
		}
		return nil
	}
	// flag provided but not defined: -foo
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		fix := "see " + cmd + " --help for its flags"
		if alt := strings.ReplaceAll(name, "_", "-"); alt != name && lookup(alt) != nil {
			fix = "did you mean --" + alt + "?"
		}
		return &csiplugin.ValidationError{What: "flag", Value: "--" + name, Rule: "is not a flag of " + cmd, Fix: fix}
	}
	// flag needs an argument: -timeout
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		name = strings.TrimLeft(name, "-")
		return &csiplugin.ValidationError{What: "flag", Value: "--" + name, Rule: "needs a value",
			Fix: "write --" + name + "=<value>" + example(lookup(name), name, "")}
	}
	var value, name, source string
	switch {
	// invalid value "5" for flag -timeout: ...; invalid boolean value "yes" for -enable-pprof: ...
	case strings.HasPrefix(msg, "invalid value "), strings.HasPrefix(msg, "invalid boolean value "):
		rest := strings.TrimPrefix(strings.TrimPrefix(msg, "invalid value "), "invalid boolean value ")
		v, after, ok := cutQuoted(rest)
		if !ok {
			return err
		}
		after = strings.TrimPrefix(strings.TrimPrefix(after, " for flag "), " for ")
		name, _, _ = strings.Cut(strings.TrimLeft(after, "-"), ":")
		value = v
	// could not parse "soon" as duration value from environment variable "CSI_REGISTRAR_TIMEOUT" for flag timeout: ...
	case strings.HasPrefix(msg, "could not parse "):
		v, after, ok := cutQuoted(strings.TrimPrefix(msg, "could not parse "))
		if !ok {
			return err
		}
		_, src, ok1 := strings.Cut(after, " from ")
		src, flagPart, ok2 := strings.Cut(src, " for flag ")
		if !ok1 || !ok2 {
			return err
		}
		name, _, _ = strings.Cut(flagPart, ":")
		value, source = v, src
	default:
		return err
	}
	f := lookup(name)
	if f == nil {
		return err
	}
	rule, fix := flagRule(f, value)
	what := name
	if source != "" {
		what = name + " (from " + source + ")"
	}
	return badFlag(what, value, rule, fix+example(f, name, value))
}

// flagRule is the rule a value of f breaks, and the start of its fix.
func flagRule(f cli.Flag, value string) (rule, fix string) {
	switch f.(type) {
	case *cli.DurationFlag:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return "a duration needs a unit (ns, us, ms, s, m or h)", "add one"
		}
		return "must be a duration: a number with a unit (ns, us, ms, s, m or h)", "give one"
	case *cli.IntFlag, *cli.Int64Flag:
		return "must be a whole number", "give one"
	case *cli.BoolFlag:
		return "must be true or false", "give one"
	}
	return "cannot be parsed", "give a valid value"
}

// example is ", e.g. --name=<value>" for f: the given value with a unit if
// it lacks only that, else f's default when it has one.
func example(f cli.Flag, name, given string) string {
	var v string
	switch f := f.(type) {
	case *cli.DurationFlag:
		v = "5s"
		if _, err := strconv.ParseFloat(given, 64); err == nil {
			v = given + "s"
		} else if f.Value > 0 {
			v = f.Value.String()
		}
	case *cli.IntFlag, *cli.Int64Flag:
		v = "1"
		if name == "health-port" {
			v = "9809"
		}
	case *cli.BoolFlag:
		v = "true"
	default:
		return ""
	}
	return ", e.g. --" + name + "=" + v
}

// cutQuoted splits `"a \"b\"" rest` into the unquoted string and rest.
func cutQuoted(s string) (value, rest string, ok bool) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", false
	}
	v, err := strconv.Unquote(q)
	if err != nil {
		return "", "", false
	}
	return v, s[len(q):], true
}
