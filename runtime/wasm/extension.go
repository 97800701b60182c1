package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"adhost/abi"
	"adhost/runtime/manifest"
	"adhost/runtime/wasm/checkpoint"
)

// Pin is an operator's pin of one extension (host.toml [[extensions]]).
type Pin struct {
	ID      string
	Version string
	// Path is the module file.
	Path string
	// SHA256 is the lower-case hex digest of the whole file (code and
	// embedded manifest).
	SHA256 string
}

func (p Pin) String() string { return p.ID + "@" + p.Version }

// Options configure Load. The zero value is usable: no file cache, the
// manifest's limits, slog.Default.
type Options struct {
	// CacheDir is the compilation cache directory. It holds native code
	// without an integrity check, so it must be private to the host: Load
	// creates it with mode 0700 and refuses one that others can write to.
	// Empty: compile in memory only (every start pays the full compile).
	CacheDir string
	// Cache, when set, is used instead of CacheDir (share one cache between
	// extensions and tests). Load does not close it.
	Cache wazero.CompilationCache
	// Logger receives guest logs and sandbox events; nil: slog.Default().
	Logger *slog.Logger

	// MemoryMiB, ComputeLimit and PoolSize override the manifest's limits;
	// zero keeps the manifest's value. Load refuses a value outside the
	// manifest's own bounds (manifest.MaxMemoryMiB, MaxPoolSize) rather
	// than lowering it.
	MemoryMiB    int
	ComputeLimit time.Duration
	PoolSize     int
	// TurnTimeout bounds the wall-clock time of one call into the
	// extension — a model turn, a tool invocation, a discovery probe —
	// whatever the guest does meanwhile (host.toml turn_timeout_ms). A call
	// past it is stopped: TIMEOUT for a provider, TOOL_FAILED for a tool.
	// Zero: no bound, the default, since the spec has no run deadline;
	// the compute watchdog still bounds computing without waiting.
	TurnTimeout time.Duration
	// MaxInstances caps the extension's live instances (host.toml
	// max_instances); zero: no cap, the pool grows to what admission
	// allows. A cap is enforced at admission through Reserve, never as a
	// wait of an admitted run (DESIGN.md §3).
	MaxInstances int
	// IdleInstanceTTL is how long an idle instance above the warm count
	// (PoolSize) is kept; zero: DefaultIdleInstanceTTL.
	IdleInstanceTTL time.Duration
	// HighWaterMiB is the linear-memory size past which an instance is
	// discarded after its call instead of being reused (wasm memory never
	// shrinks). Zero: the instance's start size + 16 MiB, at most the cap.
	HighWaterMiB int
	// MaxSleep caps one guest sleep (poll_oneoff clock wait); the guest's
	// runtime loops for longer sleeps, and cancellation ends it early.
	// Zero: 50 ms.
	MaxSleep time.Duration
	// MaxLogBytesPerSec rate-limits guest log and stdout/stderr output;
	// zero: 64 KiB/s with a burst of 256 KiB.
	MaxLogBytesPerSec int

	// RootCAs replaces the system roots for outgoing TLS (tests use
	// httptest's certificate). Verification is never disabled.
	RootCAs *x509.CertPool
	// LookupHost resolves host names for outgoing requests; nil uses the
	// system resolver. Tests map declared names to loopback addresses.
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Typed load errors; the returned error wraps one of these and names the
// extension, the expected and the actual value.
var (
	ErrDigestMismatch  = errors.New("sha256 mismatch")
	ErrManifest        = errors.New("invalid manifest")
	ErrPinMismatch     = errors.New("manifest does not match the pin")
	ErrCompile         = errors.New("compile failed")
	ErrNoMarker        = errors.New("no ABI marker export")
	ErrUnsupportedABI  = errors.New("unsupported ABI major")
	ErrBadExport       = errors.New("bad export")
	ErrImportNotInABI  = errors.New("import not in the host's ABI table")
	ErrImportDenied    = errors.New("import not permitted by the manifest")
	ErrWASIImport      = errors.New("WASI import not allowed")
	ErrInstantiate     = errors.New("instantiate failed")
	ErrInfoMismatch    = errors.New("info does not match the pin")
	ErrClosed          = errors.New("extension closed")
	ErrKindMismatch    = errors.New("extension kind does not provide this")
	ErrInstanceConfig  = errors.New("invalid instance configuration")
	ErrModuleTooLarge  = errors.New("module too large")
	ErrCacheDirUnsafe  = errors.New("compilation cache directory is not private")
	errWatchdog        = errors.New("compute watchdog: guest computed too long without waiting")
	errOutputTooLarge  = errors.New("output larger than abi.MaxOutputBytes")
	errEmitTooLarge    = errors.New("emit payload larger than abi.MaxEmitBytes")
	errBadPointer      = errors.New("out-of-range pointer")
	errExtensionClosed = errors.New("extension closing")
)

// MaxModuleBytes bounds a module file.
const MaxModuleBytes = 256 << 20

// Extension is one loaded, verified extension: its compiled module, its
// runtime and its instance pool. It is safe for concurrent use.
type Extension struct {
	pin      Pin
	m        *manifest.Manifest
	opts     Options
	log      *slog.Logger
	rt       wazero.Runtime
	cache    wazero.CompilationCache // closed by Close when owned
	ownCache bool
	compiled wazero.CompiledModule
	imports  map[string]bool // llmhost names the module imports

	computeLimit time.Duration
	maxSleep     time.Duration
	memLimit     uint32 // bytes
	highWater    uint32 // bytes; 0 until the first instance sets it

	pool    *pool
	logRate *rateLimiter

	netMu sync.Mutex
	nets  []*netPolicy // closed with the extension

	procs procSet // live CLI processes (process.go)

	closeOnce sync.Once
	closeErr  error
}

// Load reads, verifies and compiles a pinned module and creates its first
// instance, in the order of DESIGN.md §2: digest (before compiling) →
// manifest → id/version → compile → marker and export signatures → imports
// against the ABI table and the manifest → WASI allow-list → instantiate →
// info against the pin. Every error is one line naming the extension.
func Load(ctx context.Context, pin Pin, opts Options) (*Extension, error) {
	x, err := load(ctx, pin, opts)
	if err != nil {
		return nil, fmt.Errorf("extension %s: %w", pin, err)
	}
	return x, nil
}

func load(ctx context.Context, pin Pin, opts Options) (_ *Extension, err error) {
	wasm, err := readModule(pin.Path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	got := hex.EncodeToString(sum[:])
	if want := strings.ToLower(strings.TrimSpace(pin.SHA256)); got != want {
		return nil, fmt.Errorf("%w: expected %s, actual %s", ErrDigestMismatch, want, got)
	}
	text, err := manifest.Extract(wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	m, err := manifest.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrManifest, oneLine(err))
	}
	if m.ID != pin.ID {
		return nil, fmt.Errorf("%w: id expected %q, actual %q", ErrPinMismatch, pin.ID, m.ID)
	}
	if m.Version != pin.Version {
		return nil, fmt.Errorf("%w: version expected %q, actual %q", ErrPinMismatch, pin.Version, m.Version)
	}

	// An override the host would not honour is refused, never lowered.
	switch {
	case opts.MemoryMiB > manifest.MaxMemoryMiB || opts.MemoryMiB < 0:
		return nil, fmt.Errorf("%w: MemoryMiB %d out of range 0..%d", ErrInstanceConfig, opts.MemoryMiB, manifest.MaxMemoryMiB)
	case opts.PoolSize > manifest.MaxPoolSize || opts.PoolSize < 0:
		return nil, fmt.Errorf("%w: PoolSize %d out of range 0..%d", ErrInstanceConfig, opts.PoolSize, manifest.MaxPoolSize)
	case opts.MaxInstances < 0:
		return nil, fmt.Errorf("%w: MaxInstances %d is negative", ErrInstanceConfig, opts.MaxInstances)
	}
	x := &Extension{pin: pin, m: m, opts: opts}
	if t := time.Duration(m.Limits.TimeoutMs) * time.Millisecond; t > 0 && (x.opts.TurnTimeout == 0 || t < x.opts.TurnTimeout) {
		// The manifest's own bound on a call (a fetch tool's), or the
		// operator's turn timeout when that is smaller.
		x.opts.TurnTimeout = t
	}
	x.log = opts.logger().With("extension", pin.String())
	memMiB := m.Limits.MemoryMiB
	if opts.MemoryMiB > 0 {
		memMiB = opts.MemoryMiB
	}
	x.memLimit = uint32(memMiB) << 20
	x.computeLimit = time.Duration(m.Limits.ComputeMs) * time.Millisecond
	if opts.ComputeLimit > 0 {
		x.computeLimit = opts.ComputeLimit
	}
	x.maxSleep = opts.MaxSleep
	if x.maxSleep <= 0 {
		x.maxSleep = 50 * time.Millisecond
	}
	poolSize := m.Limits.PoolSize
	if opts.PoolSize > 0 {
		poolSize = opts.PoolSize
	}
	rate := opts.MaxLogBytesPerSec
	if rate <= 0 {
		rate = 64 << 10
	}
	x.logRate = newRateLimiter(float64(rate), float64(4*rate))

	x.cache = opts.Cache
	if x.cache == nil && opts.CacheDir != "" {
		if err := privateDir(opts.CacheDir); err != nil {
			return nil, err
		}
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache: %w", err)
		}
		x.cache, x.ownCache = c, true
	}
	cfg := wazero.NewRuntimeConfig().
		// Not WithCloseOnContextDone: the module is instrumented instead
		// (package checkpoint), which stops a computing guest as surely
		// at a fraction of the cost.
		WithMemoryLimitPages(uint32(memMiB) * 16) // 64 KiB pages
	if x.cache != nil {
		cfg = cfg.WithCompilationCache(x.cache)
	}
	x.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	defer func() {
		if err != nil {
			_ = x.closeRuntime(context.WithoutCancel(ctx))
		}
	}()

	instrumented, err := checkpoint.Instrument(wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCompile, oneLine(err))
	}
	x.compiled, err = x.rt.CompileModule(ctx, instrumented)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCompile, oneLine(err))
	}
	if err := checkExports(x.compiled); err != nil {
		return nil, err
	}
	if x.imports, err = checkImports(x.compiled, m); err != nil {
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, x.rt); err != nil {
		return nil, fmt.Errorf("%w: WASI: %v", ErrInstantiate, err)
	}
	if err := x.instantiateHost(ctx); err != nil {
		return nil, fmt.Errorf("%w: host module: %v", ErrInstantiate, err)
	}
	x.pool = newPool(x, poolSize, opts.MaxInstances, opts.IdleInstanceTTL)
	inst, err := x.newInstance(ctx)
	if err != nil {
		return nil, err
	}
	discard, err := x.checkInfo(ctx, inst)
	if err != nil || discard {
		inst.close(context.WithoutCancel(ctx))
	}
	if err != nil {
		return nil, err
	}
	if !discard {
		x.pool.put(inst)
	}
	return x, nil
}

func readModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxModuleBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrModuleTooLarge, path, MaxModuleBytes)
	}
	return b, nil
}

// privateDir creates dir with mode 0700 and refuses an existing directory
// that group or others can access: the cache holds native code that wazero
// loads without an integrity check.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("compilation cache: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("compilation cache: %w", err)
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %v, want 0700", ErrCacheDirUnsafe, dir, fi.Mode().Perm())
	}
	return nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// checkExports requires exactly one known ABI marker and the exact
// signatures of _initialize and plugin_call.
func checkExports(c wazero.CompiledModule) error {
	exports := c.ExportedFunctions()
	var markers []string
	for name := range exports {
		if strings.HasPrefix(name, abi.ExportMarkerPrefix) {
			markers = append(markers, name)
		}
	}
	if len(markers) == 0 {
		return fmt.Errorf("%w: expected %s", ErrNoMarker, abi.ExportMarkerV1)
	}
	for _, name := range markers {
		if name != abi.ExportMarkerV1 {
			return fmt.Errorf("%w: expected %s, actual %s", ErrUnsupportedABI, abi.ExportMarkerV1, name)
		}
	}
	for _, want := range []struct {
		name            string
		params, results []api.ValueType
	}{
		{abi.ExportMarkerV1, nil, nil},
		{abi.ExportInitialize, nil, nil},
		{abi.ExportCall, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	} {
		def, ok := exports[want.name]
		if !ok {
			return fmt.Errorf("%w: missing export %s", ErrBadExport, want.name)
		}
		if !bytes.Equal(def.ParamTypes(), want.params) || !bytes.Equal(def.ResultTypes(), want.results) {
			return fmt.Errorf("%w: %s has signature %s, expected %s", ErrBadExport, want.name,
				sig(def.ParamTypes(), def.ResultTypes()), sig(want.params, want.results))
		}
	}
	if _, ok := c.ExportedMemories()["memory"]; !ok {
		return fmt.Errorf("%w: missing exported memory \"memory\"", ErrBadExport)
	}
	return nil
}

func sig(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		var s []string
		for _, t := range ts {
			s = append(s, api.ValueTypeName(t))
		}
		return strings.Join(s, ",")
	}
	return "(" + names(params) + ")->(" + names(results) + ")"
}

// wasiAllowed is what Go's wasip1 port (and a typical C/Rust reactor)
// imports. File functions are served with no preopened directory, so they
// find nothing; sockets and anything else are refused at load.
var wasiAllowed = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true, "random_get": true, "sched_yield": true,
	"poll_oneoff": true, "proc_exit": true,
	"fd_write": true, "fd_read": true, "fd_close": true, "fd_seek": true, "fd_sync": true,
	"fd_fdstat_get": true, "fd_fdstat_set_flags": true, "fd_filestat_get": true,
	"fd_prestat_get": true, "fd_prestat_dir_name": true, "fd_readdir": true,
	"path_open": true, "path_filestat_get": true,
}

// checkImports checks every imported function against the ABI v1 table (by
// exact signature) and the manifest's permissions, and every WASI import
// against the allow-list. It returns the llmhost names imported.
func checkImports(c wazero.CompiledModule, m *manifest.Manifest) (map[string]bool, error) {
	if mems := c.ImportedMemories(); len(mems) > 0 {
		mod, name, _ := mems[0].Import()
		return nil, fmt.Errorf("%w: memory %s.%s", ErrImportNotInABI, mod, name)
	}
	used := map[string]bool{}
	for _, def := range c.ImportedFunctions() {
		mod, name, _ := def.Import()
		switch mod {
		case abi.HostModule:
			hf, ok := hostTable[name]
			if !ok {
				return nil, fmt.Errorf("%w: %s.%s", ErrImportNotInABI, mod, name)
			}
			if !bytes.Equal(def.ParamTypes(), hf.params) || !bytes.Equal(def.ResultTypes(), hf.results) {
				return nil, fmt.Errorf("%w: %s.%s has signature %s, expected %s", ErrImportNotInABI, mod, name,
					sig(def.ParamTypes(), def.ResultTypes()), sig(hf.params, hf.results))
			}
			switch {
			case hf.kv && !m.KV:
				return nil, fmt.Errorf("%w: %s.%s needs kv = true", ErrImportDenied, mod, name)
			case hf.network && !m.HasNetwork():
				return nil, fmt.Errorf("%w: %s.%s needs a [network] table", ErrImportDenied, mod, name)
			case hf.process && m.Process == nil:
				return nil, fmt.Errorf("%w: %s.%s needs a [process] table", ErrImportDenied, mod, name)
			}
			used[name] = true
		case checkpoint.Module:
			// Added by checkpoint.Instrument, which refuses a module
			// importing from this module itself.
			if name != checkpoint.Name || len(def.ParamTypes())+len(def.ResultTypes()) != 0 {
				return nil, fmt.Errorf("%w: %s.%s", ErrImportNotInABI, mod, name)
			}
		case wasi_snapshot_preview1.ModuleName:
			if !wasiAllowed[name] {
				return nil, fmt.Errorf("%w: %s.%s", ErrWASIImport, mod, name)
			}
		default:
			return nil, fmt.Errorf("%w: %s.%s", ErrImportNotInABI, mod, name)
		}
	}
	return used, nil
}

// checkInfo calls OpInfo on a fresh instance and compares it with the pin
// and the manifest.
func (x *Extension) checkInfo(ctx context.Context, inst *instance) (discard bool, err error) {
	res := x.invoke(ctx, inst, &callState{op: abi.OpInfo})
	return res.discard, x.checkInfoResult(res)
}

func (x *Extension) checkInfoResult(res callResult) error {
	if res.err != nil {
		return fmt.Errorf("%w: info call failed: %v", ErrInfoMismatch, res.err)
	}
	if res.status != abi.StatusOK {
		return fmt.Errorf("%w: info returned status %d", ErrInfoMismatch, res.status)
	}
	var info abi.Info
	if err := decodeStrict(res.output, &info); err != nil {
		return fmt.Errorf("%w: info output: %v", ErrInfoMismatch, err)
	}
	switch {
	case info.ID != x.pin.ID:
		return fmt.Errorf("%w: id expected %q, actual %q", ErrInfoMismatch, x.pin.ID, info.ID)
	case info.Version != x.pin.Version:
		return fmt.Errorf("%w: version expected %q, actual %q", ErrInfoMismatch, x.pin.Version, info.Version)
	case info.Kind != x.m.Kind:
		return fmt.Errorf("%w: kind expected %q, actual %q", ErrInfoMismatch, x.m.Kind, info.Kind)
	}
	return nil
}

// Manifest returns the extension's validated manifest. Callers must not
// modify it.
func (x *Extension) Manifest() *manifest.Manifest { return x.m }

// Pin returns the pin the extension was loaded with.
func (x *Extension) Pin() Pin { return x.pin }

// Close stops handing out instances, waits for calls in flight to return
// their instances (or ctx), and closes the runtime and the cache it owns.
//
// A call that outlives ctx keeps the runtime: wazero does not support
// closing a runtime under a running call (its WASI file table is torn
// down while the guest writes to it — a data race, found by -race), so
// the runtime is closed when the last such call returns. Such a call is
// bounded: its CLI processes are stopped here, and the compute watchdog
// and the caller's context stop the guest.
func (x *Extension) Close(ctx context.Context) error {
	x.closeOnce.Do(func() {
		done := x.pool.close(ctx)
		x.netMu.Lock()
		for _, np := range x.nets {
			np.close()
		}
		x.netMu.Unlock()
		x.procs.stopAll() // no CLI process outlives its extension
		if !done {
			go func() {
				x.pool.wait()
				if err := x.closeRuntime(context.Background()); err != nil {
					x.log.Warn("extension runtime close failed", "err", err)
				}
			}()
			return
		}
		x.closeErr = x.closeRuntime(ctx)
	})
	return x.closeErr
}

func (x *Extension) closeRuntime(ctx context.Context) error {
	var errs []error
	if x.rt != nil {
		errs = append(errs, x.rt.Close(ctx))
	}
	if x.ownCache && x.cache != nil {
		errs = append(errs, x.cache.Close(ctx))
	}
	return errors.Join(errs...)
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
