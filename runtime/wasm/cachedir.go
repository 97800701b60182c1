package wasm

// PrivateCacheDir makes dir a compilation cache directory as Load does for
// Options.CacheDir: created with mode 0700, refused (ErrCacheDirUnsafe)
// when group or others can reach it, since wazero loads the native code
// there without checking it. Other wazero users of the host (the PDF
// extractor in runtime/wasm/pdfium) hold their caches to the same rule.
func PrivateCacheDir(dir string) error { return privateDir(dir) }
