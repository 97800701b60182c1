package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// store is what the tool needs of its kv namespace (sdk.KV in the
// sandbox, a map in the tests).
type store interface {
	Get(key string) (val []byte, found bool, err error)
	Put(key string, val []byte) error
	Delete(key string) (existed bool, err error)
	List() ([]string, error)
}

type request struct {
	Op    string  `json:"op"`
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

// run performs one operation and returns the tool's output. Problems the
// model can fix (a missing key, a note too large, a full notebook) are
// outputs with an "error" member; a failing store is an error (the call
// then fails and the run's outcome is uncertain: a put may have landed).
func run(s store, args json.RawMessage) (json.RawMessage, error) {
	var r request
	if err := json.Unmarshal(args, &r); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "arguments do not decode")
	}
	key := ""
	if r.Key != nil {
		key = *r.Key
	}
	needKey := r.Op == "put" || r.Op == "get" || r.Op == "delete"
	switch {
	case needKey && key == "":
		return problem("%s needs a non-empty key", r.Op), nil
	case needKey && (len(key) > abi.MaxKVKeyBytes || !utf8.ValidString(key)):
		return problem("a key is at most %d bytes of UTF-8", abi.MaxKVKeyBytes), nil
	}
	switch r.Op {
	case "put":
		if r.Value == nil {
			return problem("put needs a value"), nil
		}
		if len(*r.Value) > abi.MaxKVValueBytes {
			return problem("a note is at most %d bytes", abi.MaxKVValueBytes), nil
		}
		err := s.Put(key, []byte(*r.Value))
		if isErrno(err, abi.ErrLimit) {
			return problem("the notebook is full: at most %d notes and %d bytes of keys and notes", abi.MaxKVKeys, abi.MaxKVSubjectBytes), nil
		}
		if err != nil {
			return nil, storeFailed(err)
		}
		return json.RawMessage(`{"ok":true}`), nil
	case "get":
		val, found, err := s.Get(key)
		if err != nil {
			return nil, storeFailed(err)
		}
		if !found {
			return json.RawMessage(`{"found":false}`), nil
		}
		return encode(struct {
			Found bool   `json:"found"`
			Value string `json:"value"`
		}{true, string(val)}), nil
	case "delete":
		existed, err := s.Delete(key)
		if err != nil {
			return nil, storeFailed(err)
		}
		return encode(struct {
			Deleted bool `json:"deleted"`
		}{existed}), nil
	case "list":
		keys, err := s.List()
		if err != nil {
			return nil, storeFailed(err)
		}
		if keys == nil {
			keys = []string{}
		}
		return encode(struct {
			Keys []string `json:"keys"`
		}{keys}), nil
	}
	return problem("op must be put, get, delete or list"), nil
}

func problem(format string, args ...any) json.RawMessage {
	return encode(struct {
		Error string `json:"error"`
	}{fmt.Sprintf(format, args...)})
}

func encode(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func isErrno(err error, e abi.Errno) bool {
	var he *sdk.HTTPError
	return errors.As(err, &he) && he.Errno == e
}

func storeFailed(err error) error {
	return sdk.Errorf(sdk.CodeToolFailed, "notes store: %v", err)
}
