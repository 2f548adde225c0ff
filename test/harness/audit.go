package harness

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"sort"
	"time"
)

// AuditEvent is one apiserver audit event, the fields the suite and the benchmarks read.
type AuditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// AuditReader reads an audit log incrementally: each Read returns the events appended since
// the previous one (whole lines only).
type AuditReader struct {
	Path   string
	offset int64
}

// NewAuditReader starts reading path at its current end: only later events are returned.
func NewAuditReader(path string) *AuditReader {
	r := &AuditReader{Path: path}
	if fi, err := os.Stat(path); err == nil {
		r.offset = fi.Size()
	}
	return r
}

// Read returns the complete events appended since the last Read.
func (r *AuditReader) Read() ([]AuditEvent, error) {
	f, err := os.Open(r.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var out []AuditEvent
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			// A partial last line is read again next time.
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		r.offset += int64(len(line))
		var ev AuditEvent
		if json.Unmarshal(line, &ev) == nil {
			out = append(out, ev)
		}
	}
}

// RequestCount is how many requests a user issued with one verb on one resource.
type RequestCount struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
	Count    int    `json:"count"`
}

// CountRequests counts the requests of user by verb and resource (resource/subresource,
// prefixed with the API group when not core), one per audit ID whatever its stages, most
// frequent first.
func CountRequests(events []AuditEvent, user string) []RequestCount {
	seen := map[string]bool{}
	counts := map[[2]string]int{}
	for _, ev := range events {
		if ev.User.Username != user || seen[ev.AuditID] {
			continue
		}
		seen[ev.AuditID] = true
		res := ev.ObjectRef.Resource
		if res == "" {
			res = ev.RequestURI
		}
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		if ev.ObjectRef.APIGroup != "" {
			res = ev.ObjectRef.APIGroup + "/" + res
		}
		counts[[2]string{ev.Verb, res}]++
	}
	out := make([]RequestCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, RequestCount{Verb: k[0], Resource: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		return out[i].Verb < out[j].Verb
	})
	return out
}
