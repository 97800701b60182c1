//go:build wasip1

package sdk

import "unsafe"

// The kv imports (abi.HostKV*). Only a module that calls Call.KV links
// these methods, and so imports them.

//go:wasmimport llmhost kv_get
func hostKVGet(key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport llmhost kv_put
func hostKVPut(key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32) int32

//go:wasmimport llmhost kv_delete
func hostKVDelete(key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport llmhost kv_list
func hostKVList(buf unsafe.Pointer, capacity uint32) int32

func (wasmHost) KVGet(key, buf []byte) int32 {
	return hostKVGet(ptr(key), uint32(len(key)), ptr(buf), uint32(len(buf)))
}
func (wasmHost) KVPut(key, val []byte) int32 {
	return hostKVPut(ptr(key), uint32(len(key)), ptr(val), uint32(len(val)))
}
func (wasmHost) KVDelete(key []byte) int32 { return hostKVDelete(ptr(key), uint32(len(key))) }
func (wasmHost) KVList(buf []byte) int32   { return hostKVList(ptr(buf), uint32(len(buf))) }
