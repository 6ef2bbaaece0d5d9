package session

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
)

// Child processes: the test binary re-executed with childEnv naming a role.
const childEnv = "PETAL_SESSION_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startChild starts the test binary in a role; env adds KEY=value settings.
func startChild(t *testing.T, role string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stdin, bufio.NewReader(stdout)
}

func runChildToEnd(t *testing.T, role string, env ...string) {
	t.Helper()
	cmd, stdin, out := startChild(t, role, env...)
	stdin.Close()
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child %s: %v", role, err)
	}
}

func runChild(role string) error {
	dir, name := os.Getenv("STORE"), os.Getenv("SESSION")
	switch role {
	case "turn1": // load the oracle, prefill N tokens of SEED, save them as a turn
		ck, err := checkpoint.Open(oracleDir)
		if err != nil {
			return err
		}
		m, err := model.Load(ck, cpu.New(), 64)
		if err != nil {
			return err
		}
		st, err := OpenStore(dir, ModelFingerprint(ck), StoreOptions{})
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(os.Getenv("N"))
		seed, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
		s := m.NewState(1024)
		if err := m.Forward(s, tokenIDs(n, seed, m.Dims.Vocab), model.NoLogits, nil); err != nil {
			return err
		}
		data, err := m.Snapshot(s)
		if err != nil {
			return err
		}
		_, err = st.SaveTurn(name, data)
		return err
	case "fork": // fork SESSION into TO
		ck, err := checkpoint.Open(oracleDir)
		if err != nil {
			return err
		}
		st, err := OpenStore(dir, ModelFingerprint(ck), StoreOptions{})
		if err != nil {
			return err
		}
		_, err = st.Fork(name, os.Getenv("TO"))
		return err
	case "saveloop": // save numbered synthetic turns until killed
		st, err := OpenStore(dir, testFP(1), StoreOptions{Retention: 3})
		if err != nil {
			return err
		}
		for k := 1; ; k++ {
			if _, err := st.SaveTurn(name, numbered(k)); err != nil {
				return err
			}
			fmt.Println("saved", k)
		}
	case "churn": // take and release the session's lock back to back until stdin closes
		st, err := OpenStore(dir, testFP(1), StoreOptions{LockTimeout: time.Minute})
		if err != nil {
			return err
		}
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
		for k := 0; ; k++ {
			ss, err := st.Lock(name)
			if err != nil {
				return err
			}
			if k == 0 {
				fmt.Println("locked")
			}
			time.Sleep(5 * time.Millisecond) // a job's work
			if err := ss.Unlock(); err != nil {
				return err
			}
			select {
			case <-stop:
				return nil
			default:
			}
		}
	case "hold": // hold the session's lock until stdin closes
		st, err := OpenStore(dir, testFP(1), StoreOptions{})
		if err != nil {
			return err
		}
		ss, err := st.Lock(name)
		if err != nil {
			return err
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		return ss.Unlock()
	}
	return fmt.Errorf("unknown role %q", role)
}

// numbered is a 4 MB synthetic state that says which save it was: its
// first token is k and its values derive from k.
func numbered(k int) model.StateData {
	d := synthStateWidth(512, 1024, uint64(k))
	d.Tokens[0] = int32(k)
	return d
}

// TestCrossProcessContinue: turn 1 prefilled and saved in another process
// continues here exactly as a single process would, directly and through a
// fork made by a third process.
func TestCrossProcessContinue(t *testing.T) {
	m, fp := loadOracle(t)
	dir := filepath.Join(t.TempDir(), "store")
	const seed, n = 5, 80
	runChildToEnd(t, "turn1", "STORE="+dir, "SESSION=a", "SEED="+strconv.Itoa(seed), "N="+strconv.Itoa(n))
	runChildToEnd(t, "fork", "STORE="+dir, "SESSION=a", "TO=b")

	prompt := tokenIDs(n, seed, m.Dims.Vocab)
	next := tokenIDs(6, 6, m.Dims.Vocab)
	single := m.NewState(1024)
	if err := m.Forward(single, prompt, model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	want := greedy(t, m, single, next, 10)

	st, err := OpenStore(dir, fp, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		r, err := st.Latest(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Data.Tokens, prompt) {
			t.Fatalf("session %s restored %d tokens, not the prompt", name, len(r.Data.Tokens))
		}
		s, err := m.Import(r.Data, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if got := greedy(t, m, s, next, 10); !slices.Equal(got, want) {
			t.Errorf("session %s continues with %v, a single process with %v", name, got, want)
		}
	}
}

// TestKillDuringSave: a writer killed with SIGKILL at random points of a
// save loop always leaves a latest snapshot that loads, verifies and is
// one whole save; its temporary files are never listed and GC removes them.
func TestKillDuringSave(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGKILL")
	}
	dir := filepath.Join(t.TempDir(), "store")
	st, err := OpenStore(dir, testFP(1), StoreOptions{Retention: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveTurn("k", numbered(1)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	leftovers := 0
	for i := range 20 {
		cmd, _, out := startChild(t, "saveloop", "STORE="+dir, "SESSION=k")
		if _, err := out.ReadString('\n'); err != nil { // one save done: the loop is running
			t.Fatalf("iteration %d: child: %v", i, err)
		}
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		r, err := st.Latest("k")
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		k := int(r.Data.Tokens[0])
		if !reflect.DeepEqual(r.Data, numbered(k)) {
			t.Fatalf("iteration %d: the latest snapshot is not save %d as written", i, k)
		}
		d, err := st.Show("k")
		if err != nil || d.Turns < 1 || d.Turns > 4 { // retention 3, plus one if killed before pruning
			t.Fatalf("iteration %d: %v, %d turns", i, err, d.Turns)
		}
		leftovers += countTemps(t, filepath.Join(dir, "k"))
	}
	t.Logf("%d of 20 kills left a temporary file", leftovers)
	temps := countTemps(t, filepath.Join(dir, "k"))
	rep, err := st.GC(0, 0)
	if err != nil || rep.TempFiles != temps || countTemps(t, filepath.Join(dir, "k")) != 0 {
		t.Fatalf("GC: %v, removed %d of %d temporary files", err, rep.TempFiles, temps)
	}
	if _, err := st.Latest("k"); err != nil {
		t.Fatal(err)
	}
}

func countTemps(t *testing.T, dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if isTemp(e.Name()) {
			n++
		}
	}
	return n
}

// TestLockContentionProcesses: while another process holds a session, a
// writer with a short timeout fails naming the session, the lock file and
// the holder; a patient one waits until it is released.
func TestLockContentionProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cmd, stdin, out := startChild(t, "hold", "STORE="+dir, "SESSION=shared")
	if line, err := out.ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	impatient, _ := OpenStore(dir, testFP(1), StoreOptions{LockTimeout: 100 * time.Millisecond})
	_, err := impatient.SaveTurn("shared", synthState(2, 1))
	var le *LockError
	if !errors.As(err, &le) {
		t.Fatalf("got %v, want a lock error", err)
	}
	for _, want := range []string{`"shared"`, filepath.Join(dir, ".locks", "shared.lock"), "pid " + strconv.Itoa(cmd.Process.Pid)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}

	patient, _ := OpenStore(dir, testFP(1), StoreOptions{LockTimeout: 20 * time.Second})
	released := make(chan struct{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(released)
		stdin.Close()
	}()
	if _, err := patient.SaveTurn("shared", synthState(2, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	default:
		t.Fatal("saved while the other process held the session")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// TestLockFairnessProcesses: a writer that releases the session between
// jobs and takes it again at once does not starve another process waiting
// for it: the waiter gets the session within a few of the holder's jobs.
func TestLockFairnessProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cmd, stdin, out := startChild(t, "churn", "STORE="+dir, "SESSION=shared")
	if line, err := out.ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	waiter, _ := OpenStore(dir, testFP(1), StoreOptions{LockTimeout: time.Second})
	for i := range 3 {
		time.Sleep(50 * time.Millisecond) // the other process takes the session back meanwhile
		start := time.Now()
		ss, err := waiter.Lock("shared")
		if err != nil {
			t.Fatalf("job %d of the second process: %v", i, err)
		}
		t.Logf("job %d waited %v", i, time.Since(start))
		time.Sleep(5 * time.Millisecond)
		ss.Unlock()
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}
