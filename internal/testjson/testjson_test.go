package testjson

import (
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestA"}
make: entering
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (1.50s)\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}
`
	var got []Event
	if err := Read(strings.NewReader(in), func(e Event) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d events, want 4: %+v", len(got), got)
	}
	if got[1].Action != "output" || got[1].Test != "" || got[1].Output != "make: entering\n" {
		t.Errorf("a line that is not JSON = %+v, want an output event of no test", got[1])
	}
	if got[3].Action != "pass" || got[3].Test != "TestA" || got[3].Elapsed != 1.5 {
		t.Errorf("last event = %+v, want TestA's pass in 1.5 s", got[3])
	}
}
