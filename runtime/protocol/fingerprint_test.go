package protocol

import "testing"

func TestFingerprint(t *testing.T) {
	fp := func(body string) string {
		t.Helper()
		req, err := DecodeRunRequest([]byte(body))
		if err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		f, err := Fingerprint(req)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := fp(`{"provider":"p","model":"m","input":"hi","metadata":{"a":"1","b":"2"},"outputSchema":{"type":"object","required":["x"]}}`)
	same := fp(`{"outputSchema":{"required":["x"],"type":"object"},"metadata":{"b":"2","a":"1"},"input":"hi","model":"m","provider":"p"}`)
	if base != same || len(base) != 64 {
		t.Fatalf("key order changed the fingerprint: %s %s", base, same)
	}
	for _, body := range []string{
		`{"provider":"p","model":"m","input":"hi!","metadata":{"a":"1","b":"2"},"outputSchema":{"type":"object","required":["x"]}}`,
		`{"provider":"p","model":"m","input":"hi","metadata":{"a":"1","b":"3"},"outputSchema":{"type":"object","required":["x"]}}`,
		`{"provider":"p","model":"m","input":"hi","metadata":{"a":"1","b":"2"},"outputSchema":{"type":"object","required":["y"]}}`,
		`{"provider":"p","model":"m","input":"hi","metadata":{"a":"1","b":"2"},"outputSchema":{"type":"object","required":["x"]},"maxSteps":2}`,
		`{"provider":"p","model":"m","input":"hi","metadata":{"a":"1","b":"2"}}`,
	} {
		if fp(body) == base {
			t.Errorf("a changed request has the same fingerprint: %s", body)
		}
	}
	if a, b := fp(`{"provider":"p","model":"m","input":"x","tools":["a","b"]}`), fp(`{"provider":"p","model":"m","input":"x","tools":["b","a"]}`); a == b {
		t.Error("array order ignored")
	}
}
