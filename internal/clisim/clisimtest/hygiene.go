package clisimtest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"adhost/host"
	"adhost/internal/clisim"
	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

// HygieneCase is what the process hygiene checks need of an adapter.
type HygieneCase struct {
	Adapter Adapter
	Model   string
	// Hang is a transcript that never finishes; OK one that succeeds.
	Hang, OK *clisim.Transcript
	// EnvVar is a variable of the manifest's process.env, given a value
	// to check it arrives.
	EnvVar string
}

const testToken = "clisim-test-token-0123456789"

// serve runs p behind the host's HTTP pipeline on 127.0.0.1, with the
// given idle timeout.
func serve(t *testing.T, m *wasm.Extension, p runtime.Provider, model string, idle time.Duration) string {
	t.Helper()
	man := m.Manifest()
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: "cli", Name: man.Name, Vendor: man.Vendor, AuthMode: man.AuthMode, Models: []string{model},
			Capabilities: man.Capabilities, UsageSource: man.UsageSource, Provider: p,
		}},
		Limits: runtime.Limits{IdleTimeout: idle},
		HostID: "clisim",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := host.NewServer(host.ServerOptions{Engine: eng,
		Tokens: []host.Token{{ID: "t", Subject: "tester", Secret: testToken, Providers: []string{"cli"}}}})
	s.SetReady()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		ts.Close()
	})
	return ts.URL
}

func post(ctx context.Context, t *testing.T, url, model, accept string) *http.Response {
	t.Helper()
	body := `{"provider":"cli","model":"` + model + `","input":"Count to three."}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/runs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Hygiene asserts the host's treatment of an adapter's CLI processes: a
// hung CLI and every child it spawned are gone within 5 s of a client's
// disconnect, a cancellation and an idle timeout; the CLI's environment
// is exactly HOME (the account directory, also its working directory),
// PATH and the variables host.toml names, nothing of the host's own; a
// binary replaced after it was verified is refused at the next run.
func Hygiene(t *testing.T, x *wasm.Extension, hc HygieneCase) {
	a := hc.Adapter
	t.Run("client disconnect", func(t *testing.T) {
		b := Bind(t, x, a, hc.Hang, nil)
		url := serve(t, x, b, hc.Model, 0)
		ctx, cancel := context.WithCancel(t.Context())
		resp := post(ctx, t, url, hc.Model, "text/event-stream")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: run.started") {
		}
		pids := PIDs(t, b.Fake)
		cancel() // the client goes away
		resp.Body.Close()
		if left := Gone(pids, 5*time.Second); len(left) > 0 {
			t.Fatalf("processes %v still alive 5 s after the disconnect", left)
		}
	})
	t.Run("cancellation", func(t *testing.T) {
		b := Bind(t, x, a, hc.Hang, nil)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := b.Complete(ctx, Input(hc.Hang, hc.Model), &Sink{})
			errc <- err
		}()
		pids := PIDs(t, b.Fake)
		cancel()
		if err := <-errc; protocol.CodeOf(err) != protocol.CodeCancelled {
			t.Fatalf("cancelled turn: %v, want CANCELLED", err)
		}
		if left := Gone(pids, 5*time.Second); len(left) > 0 {
			t.Fatalf("processes %v still alive 5 s after the cancellation", left)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		b := Bind(t, x, a, hc.Hang, nil)
		url := serve(t, x, b, hc.Model, 300*time.Millisecond)
		resp := post(t.Context(), t, url, hc.Model, "application/json")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), string(protocol.CodeIdleTimeout)) {
			t.Fatalf("status %d, body %s: want %s", resp.StatusCode, body, protocol.CodeIdleTimeout)
		}
		if left := Gone(PIDs(t, b.Fake), 5*time.Second); len(left) > 0 {
			t.Fatalf("processes %v still alive 5 s after the idle timeout", left)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("ADHOST_HOST_CANARY", "must-not-reach-the-cli")
		secret := "sk-clisim-" + a.ID + "-0123456789"
		b := Bind(t, x, a, hc.OK, map[string]string{hc.EnvVar: secret})
		if _, err := b.Complete(t.Context(), Input(hc.OK, hc.Model), &Sink{}); err != nil {
			t.Fatal(err)
		}
		want := []string{"HOME=" + b.Home, "PATH=" + wasm.DefaultProcessPATH, hc.EnvVar + "=" + secret}
		slices.Sort(want)
		if got := b.Fake.Env(); !slices.Equal(got, want) {
			t.Errorf("environment %q, want exactly %q", got, want)
		}
		if cwd := strings.TrimSpace(b.Fake.Read("cwd")); cwd != b.Home {
			t.Errorf("working directory %q, want the account directory %q", cwd, b.Home)
		}
	})
	t.Run("binary replaced", func(t *testing.T) {
		b := Bind(t, x, a, hc.OK, nil)
		if _, err := b.Complete(t.Context(), Input(hc.OK, hc.Model), &Sink{}); err != nil {
			t.Fatal(err)
		}
		// An upgrade in place: a new file under the same name.
		script, err := os.ReadFile(b.Fake.Path)
		if err != nil {
			t.Fatal(err)
		}
		tmp := b.Fake.Path + ".new"
		if err := os.WriteFile(tmp, append(script, "# replaced\n"...), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, b.Fake.Path); err != nil {
			t.Fatal(err)
		}
		_, err = b.Complete(t.Context(), Input(hc.OK, hc.Model), &Sink{})
		if protocol.CodeOf(err) != protocol.CodeProviderExtensionUnavail {
			t.Fatalf("replaced binary: %v, want %s", err, protocol.CodeProviderExtensionUnavail)
		}
	})
}

// Find returns the transcript named name.
func Find(t testing.TB, ts []*clisim.Transcript, name string) *clisim.Transcript {
	t.Helper()
	for _, tr := range ts {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("no transcript %q", name)
	return nil
}

// RunHygiene loads a and runs Hygiene with its "hang" transcript and the
// succeeding transcript ok.
func RunHygiene(t *testing.T, a Adapter, model, ok, envVar string) {
	x := Load(t, a)
	ts, err := clisim.Transcripts(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	Hygiene(t, x, HygieneCase{Adapter: a, Model: model, Hang: Find(t, ts, "hang"), OK: Find(t, ts, ok), EnvVar: envVar})
}
