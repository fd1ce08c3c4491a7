// Package keyerr marks a constructor's error with the key of the pipeline
// file it is about, so that `pipes validate` can point at that key's line
// and column instead of the block's. It sits below package pipe and
// imports none of pipes' packages.
//
// A target or enrichment constructor wraps each problem of one setting:
//
//	problems = append(problems, keyerr.New("partition_key", err))
//
// and the registry splits what the constructor returned (Split) into one
// problem per line, each with its key.
package keyerr

import "strings"

// Error is a problem with the value of one key of a target's or an
// enrichment's block. Key is the key as a pipeline file writes it, inside
// its block: "partition_key", "headers.X-Id", "query.id",
// "path_parameters[0]". Error() is Err's text alone: a program that builds
// a target in Go, without a file, reads the same message as before.
type Error struct {
	Key string
	Err error
}

// New returns err marked with key, nil when err is nil.
func New(key string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Key: key, Err: err}
}

// Error returns Err's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns Err, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// Problem is one problem found in an error: the key it is about ("" when
// no Error marks it: the block as a whole) and its one-line message.
type Problem struct {
	Key string
	Msg string
}

// Split gives every problem err holds, in order: each error joined by
// errors.Join (or by fmt.Errorf with several %w) is one, and each line of
// a message on several lines is one. A problem under an Error has its Key
// and its own message (the wrapping text above the Error, like
// "configuring the Kinesis target orders: ", is left out: the key says
// where); one outside any keeps the text of the errors wrapping it. nil
// gives nil.
func Split(err error) []Problem {
	if err == nil {
		return nil
	}
	var out []Problem
	split(err, "", "", &out)
	return out
}

func split(err error, key, prefix string, out *[]Problem) {
	switch e := err.(type) {
	case *Error:
		split(e.Err, e.Key, "", out)
		return
	case interface{ Unwrap() []error }:
		for _, c := range e.Unwrap() {
			if c != nil {
				split(c, key, prefix, out)
			}
		}
		return
	case interface{ Unwrap() error }:
		// A wrapper whose text ends with its cause's (fmt.Errorf's
		// "doing x: %w") passes its own text on as a prefix; another
		// (a redacting one, say) is a leaf: its cause's text may hold
		// what it hides.
		if c := e.Unwrap(); c != nil {
			if own, ok := strings.CutSuffix(err.Error(), c.Error()); ok {
				split(c, key, prefix+own, out)
				return
			}
		}
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			*out = append(*out, Problem{Key: key, Msg: prefix + line})
		}
	}
}
