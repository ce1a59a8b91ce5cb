# source: https://github.com/WongKinYiu/yolov7/pull/2146
