package demo

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// Event is one line of the cluster's log: a supervisor event or a line a
// node process logged.
type Event struct {
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// EventLog keeps the last lines written to it (one event per line) and
// copies every line to an optional writer (a log file). Create it with
// NewEventLog; it is safe for concurrent use.
type EventLog struct {
	mu   sync.Mutex
	max  int
	ring []Event
	next int
	full bool
	tee  io.Writer
	in   lineBuffer
}

// NewEventLog keeps the last max events and copies every line to tee
// (nil: nowhere).
func NewEventLog(max int, tee io.Writer) *EventLog {
	return &EventLog{max: max, ring: make([]Event, max), tee: tee}
}

// Write splits p into lines and records each complete line as an event.
func (l *EventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.in.write(p, l.add)
	return len(p), nil
}

// maxLine is the longest line a lineBuffer holds back waiting for its end.
const maxLine = 64 << 10

// lineBuffer collects written bytes and hands out complete lines, without
// their newline. A line that grows past maxLine without ending is handed
// out as it is, so that a writer that never ends a line cannot grow the
// buffer without bound. The caller serialises writes.
type lineBuffer struct{ buf []byte }

func (b *lineBuffer) write(p []byte, line func(string)) {
	b.buf = append(b.buf, p...)
	for {
		i := bytes.IndexByte(b.buf, '\n')
		if i < 0 {
			break
		}
		line(string(b.buf[:i]))
		b.buf = b.buf[i+1:]
	}
	if len(b.buf) > maxLine {
		line(string(b.buf))
		b.buf = b.buf[:0]
	}
}

// Add records one event.
func (l *EventLog) Add(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(text)
}

func (l *EventLog) add(text string) {
	if l.tee != nil {
		_, _ = io.WriteString(l.tee, text+"\n")
	}
	if l.max == 0 {
		return
	}
	l.ring[l.next] = Event{Time: time.Now(), Text: text}
	l.next = (l.next + 1) % l.max
	if l.next == 0 {
		l.full = true
	}
}

// Last returns up to n of the most recent events, oldest first.
func (l *EventLog) Last(n int) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	size := l.next
	if l.full {
		size = l.max
	}
	n = min(n, size)
	out := make([]Event, 0, n)
	for i := size - n; i < size; i++ {
		j := i
		if l.full {
			j = (l.next + i) % l.max
		}
		out = append(out, l.ring[j])
	}
	return out
}
