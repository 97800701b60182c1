package sdk

import (
	"strings"
	"testing"
)

func TestCheckEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"https://api.example.com/v1", "https://api.example.com/v1/", true},
		{"https://api.example.com/v1/", "https://api.example.com/v1/", true},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/", true},
		{"http://localhost:1/", "http://localhost:1/", true},
		{"http://[::1]:9/x", "http://[::1]:9/x/", true},
		{"http://api.example.com/v1", "", false},
		{"http://127.0.0.256/", "", false},
		{"ftp://api.example.com/", "", false},
		{"https://user:pw@api.example.com/", "", false},
		{"https://api.example.com/v1?key=x", "", false},
		{"https://api.example.com/v1#f", "", false},
		{"https://api.example.com/v1?", "", false},
		{"/relative", "", false},
		{"mailto:x@example.com", "", false},
	} {
		got, err := CheckEndpoint(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("CheckEndpoint(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && len(tc.in) > 0 && strings.Contains(err.Error(), tc.in) {
			t.Errorf("CheckEndpoint(%q) error echoes the value: %v", tc.in, err)
		}
	}
}
