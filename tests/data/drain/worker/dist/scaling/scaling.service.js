// Stand-in for n8n's ScalingService: what the drain hook reads of it (its Bull queues by name, and n8n's own
// count of the jobs it runs).
'use strict';
class ScalingService {
  constructor() {
    this.queueByName = new Map();
    this.running = 0;
  }

  getRunningJobsCount() {
    return this.running;
  }
}
module.exports = { ScalingService };
