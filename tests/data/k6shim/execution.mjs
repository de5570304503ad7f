// k6/execution stand-in: the harness sets scenario.iterationInTest before each iteration.
export default {
  scenario: { iterationInTest: 0, startTime: Date.now() },
  vu: { metrics: { metadata: {} } },
};
