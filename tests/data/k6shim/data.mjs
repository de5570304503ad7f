// k6/data stand-in: a SharedArray is the array its function returns (k6 shares it read-only between VUs).
export class SharedArray {
  constructor(name, make) {
    return Object.freeze(make());
  }
}
