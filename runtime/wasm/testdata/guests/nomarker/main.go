// Command nomarker is a test guest without an ABI marker export.
package main

func main() {}

//go:wasmexport plugin_call
func call(op int32) int32 { return 0 }
