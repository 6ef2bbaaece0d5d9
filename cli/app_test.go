package cli

import (
	"runtime"
	"strings"
	"testing"
)

// TestUnknownCommand: a mistyped command is a usage error (exit 2) that
// lists the commands and suggests the closest one.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		suggest string
		listed  string // one of the commands the message lists
	}{
		{[]string{"runn"}, `did you mean "petal run"?`, "batch"},
		{[]string{"runn", "--temperature", "0", "hi"}, `did you mean "petal run"?`, "batch"},
		{[]string{"petal", "--help"}, "", "batch"},
		{[]string{"gc", "--help"}, `did you mean "petal sessions gc"?`, "batch"},
		{[]string{"sessions", "lst"}, `did you mean "petal sessions list"?`, "show"},
	} {
		code, out, errs := runMain(t, Streams{}, tc.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, ExitUsage, errs)
		}
		if !strings.Contains(errs, "unknown command") || !strings.Contains(errs, tc.listed) {
			t.Errorf("%v: stderr %q should name the unknown command and list the commands", tc.args, errs)
		}
		if !strings.Contains(errs, tc.suggest) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, errs, tc.suggest)
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", tc.args, out)
		}
	}
	if _, _, errs := runMain(t, Streams{}, "xyzzyplugh"); strings.Contains(errs, "did you mean") {
		t.Errorf("a name close to nothing got a suggestion: %q", errs)
	}
}

// TestHelpCommand: petal help CMD [SUB] prints that command's help.
func TestHelpCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "COMMANDS"},
		{[]string{"help", "run"}, "petal run"},
		{[]string{"help", "sessions", "gc"}, "petal sessions gc"},
		{[]string{"help", "sessions"}, "petal sessions"},
	} {
		code, out, errs := runMain(t, Streams{}, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errs, tc.want)
		}
	}
	if code, _, errs := runMain(t, Streams{}, "help", "sessions", "gc", "extra"); code != ExitUsage || !strings.Contains(errs, "petal sessions gc has no subcommands") {
		t.Errorf("help sessions gc extra: exit %d, stderr %q", code, errs)
	}
	code, _, errs := runMain(t, Streams{}, "help", "runn")
	if code != ExitUsage || !strings.Contains(errs, `did you mean "petal run"?`) {
		t.Errorf("help runn: exit %d, stderr %q", code, errs)
	}
}

// TestVersion: --version names the version, commit, Go version and backends.
func TestVersion(t *testing.T) {
	code, out, errs := runMain(t, Streams{}, "--version")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"petal ", "commit ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH, "backends: cpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("--version output %q lacks %q", out, want)
		}
	}
}

// TestFlagErrorsNameTheCommand: a bad flag names the full command path.
func TestFlagErrorsNameTheCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sessions", "gc", "--bogus"}, "petal sessions gc --help"},
		{[]string{"run", "--bogus", "hi"}, "petal run --help"},
		{[]string{"--bogus"}, "(see petal --help)"},
	} {
		code, _, errs := runMain(t, Streams{}, tc.args...)
		if code != ExitUsage || !strings.Contains(errs, "-bogus") || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	// the help of a subcommand names its full path
	_, out, _ := runMain(t, Streams{}, "sessions", "gc", "--help")
	if !strings.Contains(out, "petal sessions gc") {
		t.Errorf("sessions gc --help: %q", out)
	}
}
