// Stand-in for n8n's ScalingService: what the drain hook reads of it (its Bull queues by name).
'use strict';
class ScalingService {
  constructor() { this.queueByName = new Map(); }
}
module.exports = { ScalingService };
