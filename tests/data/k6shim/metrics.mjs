// k6/metrics stand-in: a Counter's add() keeps the VU's metadata as the point k6 would write.
import exec from './execution.mjs';

export const points = [];

export class Counter {
  constructor(name) {
    this.name = name;
  }

  add(value) {
    points.push({ metric: this.name, value, metadata: { ...exec.vu.metrics.metadata } });
  }
}
