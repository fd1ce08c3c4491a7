package pipes_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/pipesproject/pipes/internal/testenv"
)

// fakeAWS is the AWS environment the tests of this package give the AWS
// config chain: static test credentials, as a user of an SQS-compatible
// server would have, and no instance metadata lookups.
var fakeAWS = [][2]string{
	{"AWS_ACCESS_KEY_ID", "AKIDPIPESTEST"},
	{"AWS_SECRET_ACCESS_KEY", "pipes-test-secret"},
	{"AWS_REGION", "us-east-1"},
	{"AWS_EC2_METADATA_DISABLED", "true"},
}

// parallelIntegration is how many tests of this package that called
// t.Parallel run at once when -test.parallel is not given. They are the
// integration tests against the SQS servers and RabbitMQ, which spend
// most of their time waiting (visibility timeouts, a target's outage,
// broker round trips), so more of them than the machine has cores (the
// default: GOMAXPROCS) overlap their waits; CPU-heavy tests stay serial.
const parallelIntegration = 6

// TestMain sets the fake AWS environment once for the test binary, since
// tests that run in parallel cannot use t.Setenv (a test that sets more,
// like TestAnImportedStepFunctionsEnrichedPipeRuns, stays serial and uses
// t.Setenv: serial tests never overlap the parallel ones), and raises the
// default -test.parallel to parallelIntegration.
func TestMain(m *testing.M) {
	if err := testenv.DefaultParallel(parallelIntegration); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, kv := range fakeAWS {
		if err := os.Setenv(kv[0], kv[1]); err != nil {
			fmt.Fprintln(os.Stderr, "setting the fake AWS environment:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
