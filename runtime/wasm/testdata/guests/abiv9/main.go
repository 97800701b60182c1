// Command abiv9 is a test guest exporting an ABI marker the host does not
// know (plugin_abi_v9).
package main

func main() {}

//go:wasmexport plugin_abi_v9
func marker() {}

//go:wasmexport plugin_call
func call(op int32) int32 { return 0 }
